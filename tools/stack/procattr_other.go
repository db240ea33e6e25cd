//go:build !unix

package main

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

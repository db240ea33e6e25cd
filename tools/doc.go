// Package tools holds Lectern's commands, each a package main in a folder
// of its own (README.md, Layout), and tools/internal what several of them
// share (building the stack, a temporary PostgreSQL schema). It has no
// code: it is the home of the rule that keeps tools and product apart.
//
// Tools import the product; the product never imports a tool (README,
// Layout). A generator, a benchmark or a dev server may change
// or go without touching what is deployed. guard_test.go enforces it.
package tools

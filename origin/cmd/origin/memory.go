package main

import (
	"time"

	"github.com/lectern-api/lectern/origin/wiring"
)

// The origin's memory between corpora: origin/wiring's memory.go says
// why and what; here is when.

// settleAgain is when settleMemory runs again after a swap: requests that
// began on the old corpus (a zip download streams for seconds) hold it
// until they end, and the limit must not count it.
const settleAgain = 30 * time.Second

// settleMemory is wiring.SettleMemory, with the memory limit unless the
// operator set GOMEMLIMIT (config.autoMemLimit).
func (st *stack) settleMemory() { wiring.SettleMemory(st.autoMemLimit) }

// liftMemoryLimit is wiring.ReloadMemoryLimit: before a corpus is built
// beside the served one.
func (st *stack) liftMemoryLimit() { wiring.ReloadMemoryLimit(st.autoMemLimit) }

// swapped settles the memory after a corpus swap, now and again after
// settleAgain unless a reload runs then (it settles when it ends). Run
// under st.reloading.
func (st *stack) swapped() {
	st.settleMemory()
	if st.resettle != nil {
		st.resettle.Stop()
	}
	st.resettle = time.AfterFunc(settleAgain, func() {
		if st.reloading.TryLock() {
			defer st.reloading.Unlock()
			st.settleMemory()
		}
	})
}

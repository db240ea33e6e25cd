// Package tools holds the commands around Lectern's servers, each a package
// main in a folder of its own (README.md, Layout), two scripts (tinygo,
// typedclient), and tools/internal what several commands share (building
// the stack). It has no code: it is the home of the rule that keeps tools
// and product apart.
//
// Two of them ship, released with the origin and the edge (CHANGELOG.md),
// each saying its release with -version:
//
//   - tools/lectern, the sync client customers install (`lectern sync`;
//     docs/integrating.md);
//   - tools/adminctl, the admin API client operators use
//     (docs/operations.md).
//
// Like the servers, they link no test kit or build tool (their
// guard_test.go, internal/deptest), and a release changes them as it does
// the API: for their users, in CHANGELOG.md. The rest is for development
// (corpusgen, stack, bench, meterbench, soak; the scripts): it may change
// or go without touching what is deployed or installed.
//
// Tools import the product; the product never imports a tool (README,
// Layout). guard_test.go enforces it.
package tools

// Command printversion prints version.Read().String("printversion"): what
// TestBuiltBinaryNamesItsCommit builds.
package main

import (
	"fmt"

	"github.com/lectern-api/lectern/internal/version"
)

func main() {
	fmt.Println(version.Read().String("printversion"))
}

// Command k6 is the k6 load generator, built from its pinned Go module so the
// real-k6 tests of internal/k6 run the same version as the default Job image
// (grafana/k6:1.8.1) without downloading a binary. It mirrors k6's own main package.
package main

import "go.k6.io/k6/cmd"

func main() {
	cmd.Execute()
}

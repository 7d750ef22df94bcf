// Command coredns is CoreDNS with only the plugins the local cluster's Corefile uses
// (hack/cluster.sh): cluster.local names from the Kubernetes API, nothing forwarded
// upstream. Importing fewer plugins than the upstream main keeps the cold build short.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}

// Command etcd is the etcd server, built from its Go module at the version
// pinned in go.mod (the one k8s.io/kubernetes v1.37 is tested with).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

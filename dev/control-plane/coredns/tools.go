//go:build tools

// Pins CoreDNS for the real node's cluster DNS; dev/control-plane/build.sh builds it from this
// module.
package tools

import _ "github.com/coredns/coredns"

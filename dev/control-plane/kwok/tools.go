//go:build tools

// Package tools records the kwok command, which simulates nodes and pods.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"

//go:build tools

// Package tools records the helm command used by the chart tests.
package tools

import _ "helm.sh/helm/v3/cmd/helm"

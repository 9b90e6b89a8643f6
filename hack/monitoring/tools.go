//go:build tools

// Pins promtool, built from this module by hack/tools.sh.
package main

import _ "github.com/prometheus/prometheus/cmd/promtool"

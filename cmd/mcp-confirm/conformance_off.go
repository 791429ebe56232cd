//go:build !conformance

package main

import "github.com/mcp-confirm/mcp-confirm/internal/server"

// newServer assembles the production server. A binary built with
// -tags conformance adds the conformance suite's fixture tools instead (see
// conformance.go); no flag can turn them on here.
func newServer(opts server.Options) (*server.Server, error) { return server.New(opts) }

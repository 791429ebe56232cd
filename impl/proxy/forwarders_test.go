package proxy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkProxyForwarders measures the proxy passing calls through over
// streamable HTTP to a stdio upstream (the built binary, the call allowed
// by its policy, older-era clients) against the smallest forwarders built
// on mcp-go and on go-sdk in front of the same upstream, in one loop at 1, 8
// and 32 concurrent clients (see loadRun). passthrough/mcpgo and
// passthrough/gosdk are the ratios of the medians of a call's latency,
// tput-passthrough/* those of the throughputs; mrtr/older is the median of
// the same call through the same proxy from 2026-07-28 clients over that
// of older-era clients; *-tree-MB is each server's process tree (itself
// and its upstream processes) after the phases at 1 and 32 clients.
func BenchmarkProxyForwarders(b *testing.B) {
	proxy := startProxy(b, "passthrough", eraLegacy)
	targets := []*loadTarget{
		proxy,
		startRole(b, "mcpgo", roleMCPGo),
		startRole(b, "gosdk", roleGoSDK),
		proxy.as("passthrough-mrtr", eraMRTR),
	}
	loadRun(b, targets, []string{"mcpgo", "gosdk"}, func(b *testing.B, by map[string]*loadTarget) {
		b.ReportMetric(float64(by["passthrough-mrtr"].p50())/float64(by["passthrough"].p50()), "mrtr/older")
	})
}

// BenchmarkProxyPeers measures the proxy as BenchmarkProxyForwarders does,
// against the Node proxies from npm pinned in .ci/clients (supergateway, one
// upstream process per session, and mcp-proxy, one upstream process
// shared), found through $MCP_CONFIRM_NODE_MODULES.
func BenchmarkProxyPeers(b *testing.B) {
	nm := os.Getenv("MCP_CONFIRM_NODE_MODULES")
	if nm == "" {
		b.Skip("MCP_CONFIRM_NODE_MODULES is not set: the pinned npm packages of .ci/clients are needed")
	}
	node := func(port int, script string, args ...string) *exec.Cmd {
		cmd := exec.Command("node", append([]string{filepath.Join(nm, script)}, args...)...)
		cmd.Env = append(os.Environ(), roleEnv+"="+roleUpstream)
		return cmd
	}
	sgPort, mpPort := freePort(b), freePort(b)
	targets := []*loadTarget{
		startProxy(b, "passthrough", eraLegacy),
		startTarget(b, "supergateway", eraLegacy, sgPort, node(sgPort, "supergateway/dist/index.js",
			"--stdio", os.Args[0], "--outputTransport", "streamableHttp", "--stateful", "--port", strconv.Itoa(sgPort), "--logLevel", "none")),
		startTarget(b, "mcpproxy", eraLegacy, mpPort, node(mpPort, "mcp-proxy/dist/bin/mcp-proxy.mjs",
			"--port", strconv.Itoa(mpPort), "--host", "127.0.0.1", "--server", "stream", "--", os.Args[0])),
	}
	loadRun(b, targets, []string{"supergateway", "mcpproxy"}, nil)
}

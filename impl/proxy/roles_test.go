package proxy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// roleEnv names the process a re-executed test binary plays in the load
// benchmarks (load_test.go): a stdio upstream, or a minimal forwarder from
// HTTP to that upstream built on go-sdk or on mcp-go. Each runs in a
// process of its own, as the proxy does, so that no two share a collector.
// (Not MCP_CONFIRM_*: the proxy never passes its own variables upstream.)
const roleEnv = "PROXY_BENCH_ROLE"

// Roles of a re-executed test binary.
const (
	roleUpstream = "upstream"
	roleGoSDK    = "gosdk"
	roleMCPGo    = "mcpgo"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if proxyBin != "" {
		os.RemoveAll(filepath.Dir(proxyBin))
	}
	os.Exit(code)
}

func runRole(role string) error {
	ctx := context.Background()
	switch role {
	case roleUpstream:
		return serveEchoUpstream(ctx)
	case roleGoSDK:
		return forwardGoSDK(ctx)
	case roleMCPGo:
		return forwardMCPGo(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

type echoArgs struct {
	Text string `json:"text"`
}

// serveEchoUpstream is the upstream of the load benchmarks: a go-sdk server
// on stdio whose one tool, echo, returns its text.
func serveEchoUpstream(ctx context.Context) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo-upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	return s.Run(ctx, &mcp.StdioTransport{})
}

// upstreamCommand runs this test binary as the echo upstream.
func upstreamCommand() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"="+roleUpstream)
	cmd.Stderr = os.Stderr
	return cmd
}

// serveForwarder serves h on a loopback port and logs the address the way
// the mcp-confirm binary does, for startTarget.
func serveForwarder(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "serving addr=http://%s\n", ln.Addr())
	return http.Serve(ln, h)
}

// forwardGoSDK is the smallest go-sdk forwarder: a downstream go-sdk server
// whose tools/list and tools/call go to one go-sdk client connection to the
// upstream, shared by every session.
func forwardGoSDK(ctx context.Context) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "gosdk-forwarder", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: upstreamCommand()}, nil)
	if err != nil {
		return err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "gosdk-forwarder", Version: "1"},
		&mcp.ServerOptions{Capabilities: cs.InitializeResult().Capabilities})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch p := req.GetParams().(type) {
			case *mcp.ListToolsParams:
				return cs.ListTools(ctx, p)
			case *mcp.CallToolParamsRaw:
				return cs.CallTool(ctx, &mcp.CallToolParams{Meta: p.Meta, Name: p.Name, Arguments: p.Arguments})
			}
			return next(ctx, method, req)
		}
	})
	return serveForwarder(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
}

// forwardMCPGo is the smallest mcp-go forwarder, as mcp-go based proxies
// are built: one stdio client; a server with each upstream tool, whose
// handler calls it.
func forwardMCPGo(ctx context.Context) error {
	c, err := mcpgoclient.NewStdioMCPClient(os.Args[0], []string{roleEnv + "=" + roleUpstream})
	if err != nil {
		return err
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "mcpgo-forwarder", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return err
	}
	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		return err
	}
	s := mcpgoserver.NewMCPServer("mcpgo-forwarder", "1", mcpgoserver.WithToolCapabilities(false))
	for _, t := range tools.Tools {
		s.AddTool(t, func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return c.CallTool(ctx, req)
		})
	}
	return serveForwarder(mcpgoserver.NewStreamableHTTPServer(s))
}

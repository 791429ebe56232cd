package relay

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodeResult returns what go-sdk's client would have: the wire form of
// the relay's fresh copy of its result equals that of go-sdk's own decoding
// of the same bytes, for text results read cheaply and for everything it
// leaves to go-sdk.
func TestDecodeResultAsGoSDK(t *testing.T) {
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":""}],"isError":true}`,
		`{"content":[{"type":"text","text":"a","_meta":{"k":1},"annotations":{"audience":["user"],"priority":0.5}},{"type":"text","text":"b"}]}`,
		`{"_meta":{"x":"y","io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[],"structuredContent":{"n":1.5,"l":[1,"two",null]}}`,
		`{"content":[{"type":"text","text":"t"}],"resultType":"complete","ttlMs":5}`,
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"t"},{"type":"resource_link","uri":"file:///a","name":"a"}]}`,
		`{"content":[{"type":"text","text":"t","unknown":1}]}`,
		`{"content":[{"type":"text","text":"t","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":1}]}`,
		`{"content":[{"type":"image","text":"t","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text"}]}`,
		`{"content":null}`,
		`{}`,
		`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}},"requestState":"s"}`,
		`{"content":[{"type":"text","text":"t"}],"requestState":"s","inputRequests":null}`,
		// What scanTextResult reads, and what it must leave to the rest.
		"{ \"content\" : [ { \"type\" : \"text\" , \"text\" : \"a \\\"q\\\" \\u00e9 \\n ]}\" } , {\"text\":\"b\",\"type\":\"text\"} ] ,\n\"isError\" : false , \"resultType\":\"complete\" }",
		"{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe utf-8\"}],\"requestState\":\"s\\u0041\"}",
		`{"content":[],"isError":true}`,
		`{"Content":[{"type":"text","text":"case"}]}`,
		`{"content":[{"Type":"text","text":"case"}]}`,
		`{"content":[{"type":"text","TEXT":"case"}]}`,
		`{"content":[{"type":"text","text":"first"}],"content":[{"type":"text","text":"second"}]}`,
		`{"content":[{"type":"text","text":"first","text":"second"}]}`,
		`{"content":[{"type":"text","text":"t"}],"isError":null}`,
		`{"content":[{"type":"text","text":"t"}],"isError":true,"isError":false}`,
		`{"content":[{"type":"text","text":"t"}],"requestState":null}`,
		`{"content":[{"type":"text","text":"t"}],"_meta":{"k":"v"}}`,
		`{"content":[{"type":"text","text":"t"}],"structuredContent":{"k":[1,{"a":"]"}]}}`,
		`{"content":[{"type":"text","text":"t"}],"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m"}}}}`,
		`{"content":{"type":"text","text":"not an array"}}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u","version":"1"},"k":{"n":[1,2]},"io.modelcontextprotocol/x":1},"content":[{"type":"text","text":"t"}]}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[{"type":"text","text":"t"}]}`,
		`{"_meta":null,"content":[{"type":"text","text":"t"}]}`,
		`{"_meta":{"k":1,"k":2},"content":[{"type":"text","text":"t"}]}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":["text"]}`,
	} {
		got, err := decodeResult(json.RawMessage(raw))
		var want mcp.CallToolResult
		werr := json.Unmarshal([]byte(raw), &want)
		if (err != nil) != (werr != nil) {
			t.Errorf("%s: err %v, go-sdk's %v", raw, err, werr)
			continue
		}
		if err != nil {
			continue
		}
		wf := fresh(&want)
		wf.Meta = withoutProtocolKeys(wf.Meta)
		g, _ := json.Marshal(fresh(got))
		w, _ := json.Marshal(wf)
		if string(g) != string(w) {
			t.Errorf("%s:\n got  %s\n want %s", raw, g, w)
		}
	}
	// The control: the comparison sees a difference in one character.
	a, _ := decodeResult(json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`))
	var b mcp.CallToolResult
	json.Unmarshal([]byte(`{"content":[{"type":"text","text":"hellO"}]}`), &b)
	if x, y := mustJSON(t, a), mustJSON(t, &b); x == y {
		t.Fatalf("two different results marshal alike: %s", x)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scanTextResult reads the commonest results itself (or the relay would
// decode them twice as slowly, and nothing would say so).
func TestScanTextResultTakes(t *testing.T) {
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":true,"resultType":"complete"}`,
		`{"resultType":"complete","content":[]}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u","version":"1"}},"content":[{"type":"text","text":"t"}],"resultType":"complete"}`,
	} {
		if _, ok := scanTextResult([]byte(raw)); !ok {
			t.Errorf("%s: left to encoding/json", raw)
		}
	}
}

// appendCall writes what encoding/json writes for the same call (as JSON
// values: appendCall keeps the arguments' bytes), and refuses arguments
// that are not one JSON value: such bytes could add members of their own
// to the request the upstream reads, another tool's name among them.
func TestAppendCall(t *testing.T) {
	yes := mcp.InputResponseMap{"q": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}
	for _, tt := range []struct {
		name      string
		meta      mcp.Meta
		tool      string
		args      string
		state     string
		responses mcp.InputResponseMap
	}{
		{"bare", nil, "echo", `{}`, "", nil},
		{"meta", mcp.Meta{"progressToken": "t-1", "k": map[string]any{"n": 1.5}}, "write", `{"path":"/tmp/a<b>&c","n":[1,2.5e3,null]}`, "", nil},
		{"escapes", nil, "na\"me\u2028<x>", `{"s":"\u2028 \\ \"q\""}`, "st\"ate<>", nil},
		{"rounds", mcp.Meta{}, "write", ` { "a" : 1 } `, "opaque.state", yes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendCall(nil, tt.meta, tt.tool, json.RawMessage(tt.args), tt.state, tt.responses)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(&mcp.CallToolParams{Meta: tt.meta, Name: tt.tool, Arguments: json.RawMessage(tt.args), InputResponses: tt.responses, RequestState: tt.state})
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("appendCall wrote invalid JSON %s: %v", got, err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if mustJSON(t, g) != mustJSON(t, w) {
				t.Fatalf("appendCall wrote\n%s\nencoding/json writes\n%s", got, want)
			}
		})
	}
	for _, args := range []string{``, `{}, "name":"delete"`, `{"a":1}{"b":2}`, `{"a":`, `{"a":1}, "requestState":"x"`} {
		if b, err := appendCall(nil, nil, "write", json.RawMessage(args), "", nil); err == nil {
			t.Errorf("arguments %q: wrote %s, want an error", args, b)
		}
	}
}

package confirm

import (
	"runtime/debug"
	"testing"
)

func TestVersion(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	main := func(v string) debug.Module { return debug.Module{Path: modulePath, Version: v} }
	for _, tt := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{Main: main("v1.2.3")}, "v1.2.3"},
		{"source build, stamped", debug.BuildInfo{Main: main("v0.0.0-20260101120000-0123456789ab+dirty"), Settings: vcs("true")}, "v0.0.0-20260101120000-0123456789ab+dirty"},
		{"revision, clean", debug.BuildInfo{Main: main("(devel)"), Settings: vcs("false")}, rev},
		{"revision, dirty", debug.BuildInfo{Main: main("(devel)"), Settings: vcs("true")}, rev + "+dirty"},
		{"no version, no revision", debug.BuildInfo{Main: main("(devel)")}, "devel"},
		{"empty", debug.BuildInfo{Main: main("")}, "devel"},
		{"a library of another program", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app", Version: "v9.9.9"}, Settings: vcs("true"),
			Deps: []*debug.Module{{Path: "example.com/other", Version: "v0.1.0"}, {Path: modulePath, Version: "v1.4.0"}},
		}, "v1.4.0"},
		{"a library, replaced by a version", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.4.1"}}},
		}, "v1.4.1"},
		{"a library, replaced by a directory", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"}, Settings: vcs("false"),
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "../mcp-confirm"}}},
		}, "devel"},
		{"not linked at all", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v9.9.9"}}, "devel"},
	} {
		if got := version(&tt.bi); got != tt.want {
			t.Errorf("%s: version = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// modulePath is the module this package is built in: a renamed module
// would otherwise report "devel" forever.
func TestModulePath(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	if bi.Main.Path != modulePath {
		t.Fatalf("main module %q, want %q", bi.Main.Path, modulePath)
	}
}

package confirm

import "runtime/debug"

// modulePath is this module's path, as the build information names it.
const modulePath = "github.com/mcp-confirm/mcp-confirm"

// Version reports which mcp-confirm this program was built from, as its
// build information records it: the module version (a release, or the
// pseudo-version go build stamps on a source build, "+dirty" if the tree
// had uncommitted changes); failing that, the VCS revision, with "+dirty"
// likewise; failing that (go run, go test, -buildvcs=false), "devel". In a
// program that imports mcp-confirm as a library, it is the version of the
// mcp-confirm module that program requires. It is the default
// serverInfo.version of every front end ([Setup].Version).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != modulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				m = d
				if d.Replace != nil {
					m = d.Replace
				}
				break
			}
		}
		if m == nil {
			return "devel"
		}
	}
	if m.Version != "" && m.Version != "(devel)" {
		return m.Version
	}
	if m != &bi.Main {
		return "devel" // a directory replacement: no version, no revision
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev + dirty
}

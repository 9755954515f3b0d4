package player

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Grant gives principals the right to read views of streams (Config.Access). Every field
// is a list of patterns in path.Match syntax (`*`, `?`, `[a-z]`): a principal may read
// view V of stream S when a grant whose Principals match its name has a pattern of Streams
// matching S and one of Views matching V. `*` alone matches every name, one with `/` too
// (a SPIFFE id: spiffe://td/ns/prod/sa/risk); within a longer pattern `*` and `?` do not
// match `/`, so spiffe://td/ns/*/sa/risk grants every namespace's risk, and
// spiffe://td/ns/prod/* only names of one more segment.
type Grant struct {
	// Principals are token names or certificate identities (Principal.Name).
	Principals []string `yaml:"principals"`
	Streams    []string `yaml:"streams"`
	Views      []string `yaml:"views"`
	// Filter, when set, is a mandatory filter of the rows the grant gives (a CEL
	// expression over the view's columns, as a selection's filter: `tenant_id == "t1"`,
	// `region in ["eu", "us"]`): a target that reads a view through this grant receives
	// only the rows that pass it, ANDed with its own selection, through every path
	// (snapshots, recoveries, resyncs, live). When several grants give a principal a view,
	// a row passes when it passes one of them (one without a filter: every row). A
	// principal with a filtered grant on a stream must name its views (an empty Hello.views
	// would take views published later, whose grant could not be checked).
	Filter string `yaml:"filter"`
}

// access is the authorization of a player: nil grants means every principal reads
// everything (Config.Access empty).
type access struct {
	grants []Grant
}

func (c *Config) checkAccess() []error {
	var errs []error
	for i, g := range c.Access {
		for _, f := range []struct {
			name string
			pats []string
		}{{"principals", g.Principals}, {"streams", g.Streams}, {"views", g.Views}} {
			if len(f.pats) == 0 {
				errs = append(errs, fmt.Errorf("access[%d].%s: at least one pattern (\"*\" for every one)", i, f.name))
			}
			for _, p := range f.pats {
				if _, err := path.Match(p, ""); err != nil || p == "" {
					errs = append(errs, fmt.Errorf("access[%d].%s: bad pattern %q", i, f.name, p))
				}
			}
		}
		if g.Filter != "" {
			if _, _, err := compileFilter(g.Filter, nil); err != nil {
				errs = append(errs, fmt.Errorf("access[%d].filter: %v", i, err))
			}
		}
	}
	return errs
}

func matchAny(pats []string, s string) bool {
	for _, p := range pats {
		// "*" alone is "everything", as documented: path.Match's `*` stops at `/`.
		if ok, _ := path.Match(p, s); ok || p == "*" {
			return true
		}
	}
	return false
}

// grantsOf returns the grants of principal name for stream (nil access: nil, everything
// allowed).
func (a *access) grantsOf(name, stream string) (gs []Grant, restricted bool) {
	if a == nil || len(a.grants) == 0 {
		return nil, false
	}
	for _, g := range a.grants {
		if matchAny(g.Principals, name) && matchAny(g.Streams, stream) {
			gs = append(gs, g)
		}
	}
	return gs, true
}

// authorize checks that pr may read views of stream (empty views: every view of the
// stream, which needs a grant of "*"). The error names the first view refused.
func (a *access) authorize(pr Principal, stream string, views []string) error {
	gs, restricted := a.grantsOf(pr.Name, stream)
	if !restricted {
		return nil
	}
	if len(gs) == 0 {
		return fmt.Errorf("%w: principal %q may not read stream %q", ErrPermissionDenied, pr, stream)
	}
	if len(views) == 0 {
		for _, g := range gs {
			if slices.Contains(g.Views, "*") {
				return nil
			}
		}
		return fmt.Errorf("%w: principal %q may not read every view of stream %q: name the views (granted: %s)",
			ErrPermissionDenied, pr, stream, grantedViews(gs))
	}
	for _, v := range views {
		ok := false
		for _, g := range gs {
			if matchAny(g.Views, v) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%w: principal %q may not read view %q of stream %q", ErrPermissionDenied, pr, v, stream)
		}
	}
	return nil
}

func grantedViews(gs []Grant) string {
	var vs []string
	for _, g := range gs {
		vs = append(vs, g.Views...)
	}
	return strings.Join(vs, ", ")
}

// mandatory returns the mandatory filters of pr's grants for views of stream (Grant.Filter),
// by view; a view absent from the map is read whole. A filtered grant and an empty views
// (every view, even those published later) is refused with ErrPermissionDenied. authorize
// must have accepted the views.
func (a *access) mandatory(pr Principal, stream string, views []string) (map[string]string, error) {
	gs, restricted := a.grantsOf(pr.Name, stream)
	if !restricted {
		return nil, nil
	}
	if len(views) == 0 {
		for _, g := range gs {
			if g.Filter != "" {
				return nil, fmt.Errorf("%w: principal %q reads stream %q through a grant with a filter: name the views", ErrPermissionDenied, pr, stream)
			}
		}
		return nil, nil
	}
	var out map[string]string
	for _, v := range views {
		var fs []string
		whole := false
		for _, g := range gs {
			if !matchAny(g.Views, v) {
				continue
			}
			if g.Filter == "" {
				whole = true
				break
			}
			fs = append(fs, "("+g.Filter+")")
		}
		if whole || len(fs) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		if len(fs) == 1 {
			out[v] = fs[0][1 : len(fs[0])-1]
		} else {
			out[v] = strings.Join(fs, " || ")
		}
	}
	return out, nil
}

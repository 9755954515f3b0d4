package capture

import (
	"fmt"
	"slices"
	"strings"
)

// route chooses for every occurrence of a base table the Mapping its changes take, from
// the view's output bindings, and says of a table with an occurrence that has none why
// its changes re-read the whole view.
//
// Among an occurrence's bindings, those of one source (its own columns, or one chain of
// hops) form a candidate: the output columns they bind, each with the value that reaches
// it. A candidate must give each output column a value of that column's type (the values
// are compared as the view's rows hold them), and read only old values pgoutput sends:
// the table's identity, or any column under REPLICA IDENTITY FULL. The best candidate is
// the one without hops (one lookup of the view), then the one that covers the view's key
// (its values are keys: no reverse map), then the shortest chain, then the strong one,
// then the most columns.
func (d *ViewDeps) route(res *levelResult) {
	byOcc := map[*occ][]cand{}
	for j, bs := range res.outputs {
		for _, b := range bs {
			byOcc[b.o] = addCand(byOcc[b.o], j, b)
		}
	}
	reached := map[uint32]bool{}
	for _, o := range res.occs {
		t := o.table
		reached[t.OID] = true
		if _, unmapped := d.Unmapped[t.OID]; unmapped {
			continue
		}
		m, why := d.best(o, byOcc[o])
		if m == nil {
			d.Unmapped[t.OID] = why
			delete(d.Maps, t.OID)
			if o.lost != "" {
				if d.structural == nil {
					d.structural = map[uint32]bool{}
				}
				d.structural[t.OID] = true
			}
			continue
		}
		d.Maps[t.OID] = append(d.Maps[t.OID], m)
	}
	for _, t := range d.Tables {
		if !reached[t.OID] && d.Maps[t.OID] == nil {
			if _, ok := d.Unmapped[t.OID]; !ok {
				d.Unmapped[t.OID] = "not found in the query's tree"
			}
		}
	}
}

// cand is one candidate mapping: the output columns one source binds.
type cand struct {
	chain  string
	strong bool
	cols   []int       // output columns
	srcs   []*valueSrc // the value of each
}

func addCand(cs []cand, j int, b binding) []cand {
	ch := b.src.chain()
	for i := range cs {
		if cs[i].chain == ch && cs[i].strong == b.strong {
			if !slices.Contains(cs[i].cols, j) {
				cs[i].cols = append(cs[i].cols, j)
				cs[i].srcs = append(cs[i].srcs, b.src)
			}
			return cs
		}
	}
	return append(cs, cand{chain: ch, strong: b.strong, cols: []int{j}, srcs: []*valueSrc{b.src}})
}

func (d *ViewDeps) best(o *occ, cs []cand) (*Mapping, string) {
	t := o.table
	why := o.lost
	if why == "" {
		why = fmt.Sprintf("no output column holds a value of %s (select its key, or a column a join or WHERE equates to one of its columns)", o.name)
	}
	var best *Mapping
	needFull := false
	defer func() {
		if best == nil && needFull && !slices.Contains(d.NeedFull, t) {
			d.NeedFull = append(d.NeedFull, t)
		}
	}()
	score := func(m *Mapping) []int {
		b := func(v bool) int {
			if v {
				return 1
			}
			return 0
		}
		return []int{b(len(m.Hops) == 0), b(m.IsKey), -len(m.Hops), b(m.Strong), len(m.Cols)}
	}
	for _, c := range cs {
		m := &Mapping{Table: t, Occurrence: o.name, Strong: c.strong}
		var typeMiss, oldMiss string
		for i, j := range c.cols {
			src := c.srcs[i]
			tab := t
			if src.from != nil {
				tab = src.tab
			}
			vc, ok := tab.Columns[src.col]
			if !ok {
				continue
			}
			if vc.TypeOID != d.Columns[j].TypeOID {
				typeMiss = fmt.Sprintf("%s holds %s.%s, of another type", d.Columns[j].Name, tab, vc.Name)
				continue
			}
			first := t.Columns[src.first()]
			if t.ReplIdent != 'f' && !slices.ContainsFunc(t.Identity, func(c Column) bool { return c.Num == first.Num }) {
				oldMiss = fmt.Sprintf("its changes map through %s.%s, whose old values pgoutput sends only under REPLICA IDENTITY FULL (ALTER TABLE %s REPLICA IDENTITY FULL)", t, first.Name, t.QualifiedName())
				continue
			}
			m.Cols = append(m.Cols, j)
			if src.from == nil {
				m.TableCols = append(m.TableCols, vc)
			} else if len(m.Hops) == 0 {
				m.TableCols = []Column{first}
				m.Hops = hops(src)
			} else {
				last := &m.Hops[len(m.Hops)-1]
				last.Out = append(last.Out, vc)
			}
		}
		if len(m.Cols) == 0 {
			switch {
			case oldMiss != "":
				why = oldMiss
				needFull = true
			case typeMiss != "":
				why = typeMiss
			}
			continue
		}
		if key := d.keyOf(m); key != nil {
			m = key
		}
		m.Via = via(m)
		if best == nil || slices.Compare(score(m), score(best)) > 0 {
			best = m
		}
	}
	return best, why
}

// keyOf restricts m to the view's key columns when it binds them all, or returns nil.
func (d *ViewDeps) keyOf(m *Mapping) *Mapping {
	k := &Mapping{Table: m.Table, Occurrence: m.Occurrence, Strong: m.Strong, IsKey: true}
	if len(m.Hops) > 0 {
		k.TableCols = m.TableCols
		k.Hops = slices.Clone(m.Hops)
		k.Hops[len(k.Hops)-1].Out = nil
	}
	for _, kc := range d.Key {
		i := slices.Index(m.Cols, kc)
		if i < 0 {
			return nil
		}
		k.Cols = append(k.Cols, kc)
		if len(m.Hops) == 0 {
			k.TableCols = append(k.TableCols, m.TableCols[i])
		} else {
			last := &k.Hops[len(k.Hops)-1]
			last.Out = append(last.Out, m.Hops[len(m.Hops)-1].Out[i])
		}
	}
	return k
}

// hops turns a value's chain into the joins that compute it: the first hop matches the
// changed row's column, each next one the previous hop's result.
func hops(src *valueSrc) []Hop {
	var chain []*valueSrc
	for s := src; s.from != nil; s = s.from {
		chain = append(chain, s)
	}
	slices.Reverse(chain)
	out := make([]Hop, len(chain))
	for i, s := range chain {
		out[i] = Hop{Table: s.tab, Match: s.tab.Columns[s.match], Out: []Column{s.tab.Columns[s.col]}}
	}
	return out
}

func via(m *Mapping) string {
	var parts []string
	if len(m.Hops) > 0 {
		parts = append(parts, "a join")
	}
	if strings.Contains(m.Occurrence, "(in a subquery)") {
		parts = append(parts, "a correlated subquery")
	}
	return strings.Join(parts, ", ")
}

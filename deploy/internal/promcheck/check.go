package promcheck

import (
	"fmt"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// TargetLabels are the target labels the queries of deploy/ may use beside a metric's own:
// job and instance, which every scrape adds, and namespace and pod, which the Prometheus
// Operator adds to a ServiceMonitor's targets (deploy/kubernetes) — a query matches them
// with a regular expression that an absent label matches too (docker compose has none).
// Not service, container or endpoint, which the operator adds as well: service is the
// player's own label (the ServiceMonitor honours it), and a query grouping by the others
// would show nothing elsewhere.
var TargetLabels = []string{"job", "instance", "namespace", "pod"}

// Checker checks PromQL expressions against Metrics.
type Checker struct {
	Metrics map[string]Metric
	// TargetLabels are the labels Prometheus adds to every series of a target, which a
	// query may use beside the metric's own (job and instance; a Prometheus Operator's
	// ServiceMonitor adds namespace, pod and others).
	TargetLabels []string
}

// Result is what Check found in one expression.
type Result struct {
	// Metrics are the registered metrics it reads (a histogram's name for its series).
	Metrics []string
	// Labels are the labels of its result's series, sorted; nil when the check cannot
	// tell (a dashboard's legend may name only these).
	Labels []string
	Errs   []error
}

// labelSet is the labels a (sub)expression's series may carry; nil: not known (the check
// of a label against it is skipped).
type labelSet map[string]bool

func setOf(names ...string) labelSet {
	s := labelSet{}
	for _, n := range names {
		s[n] = true
	}
	return s
}

func (s labelSet) sorted() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// kind is what a selector's series are, for the functions that need one or the other.
type kind int

const (
	kindUnknown kind = iota
	kindCounter      // a counter, or a histogram's _bucket, _sum or _count: rate() it
	kindGauge        // a gauge: read it, or deriv() it
)

type check struct {
	c     *Checker
	res   *Result
	kinds map[parser.Expr]kind // of each VectorSelector, once labelled
}

// Check parses expr with Prometheus's parser and checks it: every metric it selects is
// registered (a histogram's by its _bucket, _sum and _count series), every label it
// matches, groups by, joins on or copies is one that its operand's series carry, rate(),
// irate(), increase() and resets() read counters, deriv(), delta(), idelta() and
// predict_linear() gauges, and histogram_quantile() gets its "le".
func (c *Checker) Check(expr string) Result {
	var res Result
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		res.Errs = append(res.Errs, err)
		return res
	}
	k := &check{c: c, res: &res, kinds: map[parser.Expr]kind{}}
	if ls := k.labels(e); ls != nil {
		res.Labels = ls.sorted()
	}
	slices.Sort(res.Metrics)
	res.Metrics = slices.Compact(res.Metrics)
	return res
}

func (k *check) errorf(format string, a ...any) {
	k.res.Errs = append(k.res.Errs, fmt.Errorf(format, a...))
}

// labels returns the labels e's series carry, checking e on the way.
func (k *check) labels(e parser.Expr) labelSet {
	switch e := e.(type) {
	case *parser.VectorSelector:
		return k.selector(e)
	case *parser.MatrixSelector:
		return k.labels(e.VectorSelector)
	case *parser.SubqueryExpr:
		return k.labels(e.Expr)
	case *parser.ParenExpr:
		return k.labels(e.Expr)
	case *parser.UnaryExpr:
		return k.labels(e.Expr)
	case *parser.StepInvariantExpr:
		return k.labels(e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral, *parser.DurationExpr:
		return labelSet{}
	case *parser.AggregateExpr:
		return k.aggregate(e)
	case *parser.Call:
		return k.call(e)
	case *parser.BinaryExpr:
		return k.binary(e)
	}
	k.errorf("%s: an expression the check does not know (%T)", e, e)
	return nil
}

// selector resolves a vector selector's metric (by name, or by a __name__ matcher) and
// checks its label matchers.
func (k *check) selector(vs *parser.VectorSelector) labelSet {
	var series []string // the registered series names the selector may read
	all := k.seriesNames()
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name != model.MetricNameLabel {
			continue
		}
		if m.Type == labels.MatchEqual {
			name = m.Value
			continue
		}
		for _, s := range all {
			if m.Matches(s) {
				series = append(series, s)
			}
		}
		if len(series) == 0 {
			k.errorf("%s: no registered metric matches %s", vs, m)
			return nil
		}
	}
	if name != "" {
		series = []string{name}
	}
	ls, kd := labelSet{}, kindUnknown
	for i, s := range series {
		base, sls, skind, err := k.series(s)
		if err != nil {
			k.errorf("%s: %v", vs, err)
			return nil
		}
		k.res.Metrics = append(k.res.Metrics, base)
		for _, l := range sls {
			ls[l] = true
		}
		if i == 0 {
			kd = skind
		} else if kd != skind {
			kd = kindUnknown
		}
	}
	for _, l := range k.c.TargetLabels {
		ls[l] = true
	}
	for _, m := range vs.LabelMatchers {
		if m.Name != model.MetricNameLabel && !ls[m.Name] {
			k.errorf("%s: %s has no label %q (it has %s)", vs, strings.Join(series, "|"), m.Name, strings.Join(ls.sorted(), ", "))
		}
	}
	k.kinds[vs] = kd
	return ls
}

// seriesNames lists the names of every series of the registered metrics.
func (k *check) seriesNames() []string {
	var out []string
	for n, m := range k.c.Metrics {
		switch m.Type {
		case dto.MetricType_HISTOGRAM:
			out = append(out, n+"_bucket", n+"_sum", n+"_count")
		case dto.MetricType_SUMMARY:
			out = append(out, n, n+"_sum", n+"_count")
		default:
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// series resolves a series name to its metric: its base name, its series' labels and kind.
func (k *check) series(name string) (string, []string, kind, error) {
	if m, ok := k.c.Metrics[name]; ok {
		switch m.Type {
		case dto.MetricType_HISTOGRAM:
			return "", nil, 0, fmt.Errorf("%s is a histogram: its series are %[1]s_bucket, %[1]s_sum and %[1]s_count", name)
		case dto.MetricType_COUNTER:
			return name, m.Labels, kindCounter, nil
		case dto.MetricType_SUMMARY:
			return name, append(slices.Clone(m.Labels), "quantile"), kindGauge, nil
		default:
			return name, m.Labels, kindGauge, nil
		}
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		m, ok := k.c.Metrics[base]
		switch {
		case !ok:
		case m.Type == dto.MetricType_HISTOGRAM && suf == "_bucket":
			return base, append(slices.Clone(m.Labels), "le"), kindCounter, nil
		case m.Type == dto.MetricType_HISTOGRAM || m.Type == dto.MetricType_SUMMARY && suf != "_bucket":
			return base, m.Labels, kindCounter, nil
		default:
			return "", nil, 0, fmt.Errorf("%s: %s is a %s, which has no %s series", name, base, strings.ToLower(m.Type.String()), suf)
		}
	}
	return "", nil, 0, fmt.Errorf("%s: no registry of the code has this metric", name)
}

func (k *check) aggregate(e *parser.AggregateExpr) labelSet {
	inner := k.labels(e.Expr)
	if e.Param != nil {
		k.labels(e.Param)
	}
	if inner != nil {
		for _, g := range e.Grouping {
			if !inner[g] {
				how := "by"
				if e.Without {
					how = "without"
				}
				k.errorf("%s: %s %s %q, which its operand's series do not carry (%s)", e, e.Op, how, g, strings.Join(inner.sorted(), ", "))
			}
		}
	}
	switch {
	case e.Op == parser.TOPK || e.Op == parser.BOTTOMK || e.Op == parser.LIMITK || e.Op == parser.LIMIT_RATIO:
		return inner // they keep their series' labels
	case e.Without:
		if inner == nil {
			return nil
		}
		out := labelSet{}
		for l := range inner {
			if !slices.Contains(e.Grouping, l) {
				out[l] = true
			}
		}
		return out
	case e.Op == parser.COUNT_VALUES:
		out := setOf(e.Grouping...)
		if s, ok := e.Param.(*parser.StringLiteral); ok {
			out[s.Val] = true
		}
		return out
	default:
		return setOf(e.Grouping...)
	}
}

// rangeArg returns the selector a range function reads, and its kind.
func (k *check) rangeArg(e parser.Expr) (*parser.VectorSelector, kind) {
	for {
		switch x := e.(type) {
		case *parser.ParenExpr:
			e = x.Expr
		case *parser.StepInvariantExpr:
			e = x.Expr
		case *parser.MatrixSelector:
			vs, ok := x.VectorSelector.(*parser.VectorSelector)
			if !ok {
				return nil, kindUnknown
			}
			return vs, k.kinds[vs]
		default:
			return nil, kindUnknown
		}
	}
}

func (k *check) call(e *parser.Call) labelSet {
	args := make([]labelSet, len(e.Args))
	for i, a := range e.Args {
		args[i] = k.labels(a)
	}
	first := func() labelSet {
		for i, a := range e.Args {
			if t := a.Type(); t == parser.ValueTypeVector || t == parser.ValueTypeMatrix {
				return args[i]
			}
		}
		return labelSet{}
	}
	str := func(i int) string {
		if i < len(e.Args) {
			if s, ok := e.Args[i].(*parser.StringLiteral); ok {
				return s.Val
			}
		}
		return ""
	}
	switch e.Func.Name {
	case "rate", "irate", "increase", "resets":
		if vs, kd := k.rangeArg(e.Args[0]); kd == kindGauge {
			k.errorf("%s: %s() of %s, a gauge: %s() is for counters (deriv() or delta() for a gauge)", e, e.Func.Name, vs.Name, e.Func.Name)
		}
	case "deriv", "delta", "idelta", "predict_linear":
		if vs, kd := k.rangeArg(e.Args[0]); kd == kindCounter {
			k.errorf("%s: %s() of %s, a counter: use rate() or increase()", e, e.Func.Name, vs.Name)
		}
	case "histogram_quantile", "histogram_fraction":
		v := args[len(args)-1]
		if v != nil && !v[labels.BucketLabel] {
			k.errorf("%s: %s() of series without %q (aggregate the _bucket series by le)", e, e.Func.Name, labels.BucketLabel)
		}
		if v == nil {
			return nil
		}
		out := labelSet{}
		for l := range v {
			if l != labels.BucketLabel {
				out[l] = true
			}
		}
		return out
	case "label_replace":
		v := args[0]
		if src := str(3); v != nil && src != "" && !v[src] {
			k.errorf("%s: label_replace() from %q, which its series do not carry", e, src)
		}
		if v == nil {
			return nil
		}
		out := setOf(v.sorted()...)
		out[str(1)] = true
		return out
	case "label_join":
		v := args[0]
		for i := 2; i < len(e.Args); i++ {
			if src := str(i); v != nil && !v[src] {
				k.errorf("%s: label_join() of %q, which its series do not carry", e, src)
			}
		}
		if v == nil {
			return nil
		}
		out := setOf(v.sorted()...)
		out[str(1)] = true
		return out
	case "absent", "absent_over_time", "vector", "time", "scalar", "pi":
		return labelSet{}
	}
	return first()
}

func (k *check) binary(e *parser.BinaryExpr) labelSet {
	l, r := k.labels(e.LHS), k.labels(e.RHS)
	switch {
	case e.LHS.Type() == parser.ValueTypeScalar:
		return r
	case e.RHS.Type() == parser.ValueTypeScalar:
		return l
	}
	vm := e.VectorMatching
	if vm == nil {
		return l
	}
	for _, m := range vm.MatchingLabels {
		if vm.On && (l != nil && !l[m] || r != nil && !r[m]) {
			k.errorf("%s: on(%s): %q is not a label of both sides (left: %s; right: %s)", e, strings.Join(vm.MatchingLabels, ", "), m,
				strings.Join(l.sorted(), ", "), strings.Join(r.sorted(), ", "))
		}
		if !vm.On && l != nil && r != nil && !l[m] && !r[m] {
			k.errorf("%s: ignoring(%s): %q is a label of neither side", e, strings.Join(vm.MatchingLabels, ", "), m)
		}
	}
	one := func(side, other labelSet, group, otherName string) labelSet {
		for _, inc := range vm.Include {
			if other != nil && !other[inc] {
				k.errorf("%s: %s(%s): %q is not a label of the %s side", e, group, strings.Join(vm.Include, ", "), inc, otherName)
			}
		}
		if side == nil {
			return nil
		}
		out := setOf(side.sorted()...)
		for _, inc := range vm.Include {
			out[inc] = true
		}
		return out
	}
	switch {
	case e.Op == parser.LOR:
		if l == nil || r == nil {
			return nil
		}
		return setOf(append(l.sorted(), r.sorted()...)...)
	case e.Op == parser.LAND || e.Op == parser.LUNLESS:
		return l
	case e.Op.IsComparisonOperator() && !e.ReturnBool:
		return l // a filter: the left side's series as they are
	case vm.Card == parser.CardManyToOne:
		return one(l, r, "group_left", "right")
	case vm.Card == parser.CardOneToMany:
		return one(r, l, "group_right", "left")
	case vm.On:
		return setOf(vm.MatchingLabels...)
	default:
		if l == nil {
			return nil
		}
		out := labelSet{}
		for n := range l {
			if !slices.Contains(vm.MatchingLabels, n) {
				out[n] = true
			}
		}
		return out
	}
}

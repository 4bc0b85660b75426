// Package filter compiles and evaluates a destination's `filter:`, a CEL
// expression (cel.dev/cel-go) over the event being received
// (docs/reference.md, "Content filters").
//
// Guarantees: an expression is type-checked when it is compiled (its result
// must be a bool, or dyn checked at run time), and a compile error carries the
// line and column of each problem; evaluation is bounded by CostLimit (CEL's
// runtime cost, a count of operations that is the same on every machine and
// under any load), and what it decodes of the body by MaxDecodeBytes,
// MaxDecodeValues and MaxDecodeDepth (bound.go: the decode comes before
// CEL counts anything), so a filter cannot slow the receiver whatever the
// body holds; evaluation never panics (cel-go recovers into an error). An
// evaluation error, the cost limit included, is the caller's to count: the
// receiver delivers rather than drops.
//
// The variables are:
//   - event: map(string, string) with "id", "type" and "source";
//   - headers: map(string, string), lower-case names, a repeated header's
//     values joined with ", " (as HTTP allows for list-valued fields), the
//     values as stored (credentials redacted);
//   - body: the request body parsed as JSON (numbers are doubles, as in
//     CEL's JSON mapping), or null when it is not JSON. For a batch source
//     (SendGrid) it is the element the event came from.
//
// The body is decoded only when an expression reads it, and then only the
// members it selects by constant keys (plan.go); a use of the whole body
// decodes it once per Event for every filter. The whole headers map is
// converted at most once per Request, and only for an expression that uses
// it whole.
package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/hookwarden/hookwarden/internal/extract"
)

// CostLimit is the runtime cost past which an evaluation stops with an error.
// A typical filter costs about 10 (three comparisons on a Stripe event: 10);
// a comprehension over thousands of elements, or a search through a very long
// string, reaches it. Evaluating up to the limit takes about 1.1 ms on a
// loaded 2-core machine (BenchmarkFilterCostLimit; 0.6-0.9 ms on
// 2026-12-07), against a commit of
// 0.3-0.4 ms: the worst a filter adds to an answer is bounded. A
// deterministic count rather than a deadline, so one event gets the same
// answer under any load.
const CostLimit = 10_000

// env is the one CEL environment every filter compiles in.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("event", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("body", cel.DynType),
		// body.a.?b.orValue(x): a missing key without has() chains.
		cel.OptionalTypes(),
		// JSON numbers are doubles: body.amount > 100 must just work.
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	)
})

// Filter is one compiled expression, safe for concurrent use.
type Filter struct {
	expr string
	prg  cel.Program
	plan *plan // what it reads of body and headers
}

// String returns the expression's source.
func (f *Filter) String() string { return f.expr }

// Issue is one compile problem; Line and Column count from 1.
type Issue struct {
	Line, Column int
	Message      string
}

func (i Issue) String() string {
	return strconv.Itoa(i.Line) + ":" + strconv.Itoa(i.Column) + ": " + i.Message
}

// CompileError lists every problem of an expression that does not compile.
type CompileError struct{ Issues []Issue }

func (e *CompileError) Error() string {
	parts := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		parts[i] = is.String()
	}
	return strings.Join(parts, "; ")
}

// Compile parses and type-checks expr. A problem in the expression is a
// *CompileError.
func Compile(expr string) (*Filter, error) {
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &CompileError{Issues: []Issue{{Line: 1, Column: 1, Message: "empty expression"}}}
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		ce := &CompileError{}
		for _, x := range iss.Errors() {
			msg := strings.TrimSuffix(x.Message, " (in container '')")
			ce.Issues = append(ce.Issues, Issue{Line: x.Location.Line(), Column: x.Location.Column() + 1, Message: msg})
		}
		return nil, ce
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, &CompileError{Issues: []Issue{{Line: 1, Column: 1,
			Message: fmt.Sprintf("the expression is of type %s; a filter must be a bool", t)}}}
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		// Constant folding evaluates constant parts now (1/0, bad regex).
		return nil, &CompileError{Issues: []Issue{{Line: 1, Column: 1, Message: err.Error()}}}
	}
	return &Filter{expr: expr, prg: prg, plan: analyse(ast.NativeRep())}, nil
}

// Request is what the events of one request share: its source and headers.
// Not safe for concurrent use (one request is one goroutine).
type Request struct {
	Source  string
	Header  http.Header
	headers ref.Val
}

// Event is the input of one evaluation: one event of a request. What is
// decoded of the body is kept, so every destination's filter reads it from
// one decode (the whole body) or from a decode of the parts it reads. Not
// safe for concurrent use.
type Event struct {
	Request  *Request
	ID, Type string
	Body     []byte
	// Doc, when set, is Body as the extractors read it (Body may then be
	// nil): its JSON validity is checked once for them and the filters.
	Doc *extract.Body

	cur        *plan   // the plan of the evaluation under way
	event      ref.Val // the event map
	full       ref.Val // the whole body decoded; nil: not yet
	partialOf  *node   // the plan whose parts partialVal holds
	partialVal ref.Val
	partialErr error // the decode of partialOf's parts was refused (bound.go)
	decodable  int8  // 0 unchecked, 1 valid JSON whose numbers decode, 2 not JSON, 3 maybe not decodable
	refused    error // a decode past the bounds (bound.go), in the evaluation under way
	fullErr    error // why full is an error value, when it is one
}

// ResolveName implements interpreter.Activation, building each variable on
// first use.
func (e *Event) ResolveName(name string) (any, bool) {
	switch name {
	case "event":
		if e.event == nil {
			src := ""
			if e.Request != nil {
				src = e.Request.Source
			}
			e.event = types.DefaultTypeAdapter.NativeToValue(map[string]string{"id": e.ID, "type": e.Type, "source": src})
		}
		return e.event, true
	case "headers":
		if e.Request == nil {
			return types.DefaultTypeAdapter.NativeToValue(map[string]string{}), true
		}
		if e.cur != nil && !e.cur.headersAll && e.Request.headers == nil {
			return types.DefaultTypeAdapter.NativeToValue(headerSubset(e.Request.Header, e.cur.headers)), true
		}
		return e.Request.headerVal(), true
	case "body":
		var n *node
		if e.cur != nil {
			n = e.cur.body
		}
		return e.bodyVal(n), true
	}
	return nil, false
}

// bodyVal is body as the plan n reads it (nil: whole).
func (e *Event) bodyVal(n *node) ref.Val {
	if e.full != nil && e.fullErr == nil {
		return e.full // already decoded whole: as good for any plan
	}
	doc := e.Body
	if e.Doc != nil {
		doc = e.Doc.Bytes
	}
	if n == nil || n.whole {
		return e.decodeWhole(doc)
	}
	if e.decodable == 0 {
		e.decodable = 1
		var valid bool
		if e.Doc != nil {
			valid = e.Doc.ValidJSON() // checked by the extractors already, as a rule
		} else {
			valid = json.Valid(doc)
		}
		if !valid {
			e.decodable = 2
		} else if mayOverflow(doc) {
			e.decodable = 3
		}
	}
	switch {
	case e.decodable == 2:
		e.full = types.NullValue // not JSON: null, for every plan
		return e.full
	case e.decodable == 1:
		if e.partialOf == n {
			if e.partialErr != nil {
				return e.refuse(e.partialErr)
			}
			return e.partialVal
		}
		v, err := partial(bytes.TrimSpace(doc), n)
		if errors.Is(err, ErrDecodeLimit) {
			e.partialOf, e.partialErr = n, err
			return e.refuse(err)
		}
		if err == nil {
			e.partialOf, e.partialVal, e.partialErr = n, types.DefaultTypeAdapter.NativeToValue(v), nil
			return e.partialVal
		}
	}
	return e.decodeWhole(doc)
}

// decodeWhole decodes the whole body, as every plan may read it, within
// the decode bounds.
func (e *Event) decodeWhole(doc []byte) ref.Val {
	if e.fullErr != nil {
		return e.refuse(e.fullErr) // refused for an earlier filter: a plan of parts may still read
	}
	valid := e.decodable == 1 || e.decodable == 3
	if e.decodable == 0 {
		if e.Doc != nil {
			valid = e.Doc.ValidJSON()
		} else {
			valid = json.Valid(doc)
		}
	}
	if !valid {
		e.full = types.NullValue // not JSON: null, and nothing to decode
		return e.full
	}
	if err := checkDecode(bytes.TrimSpace(doc)); err != nil {
		e.full, e.fullErr = types.NullValue, err
		return e.refuse(err)
	}
	var v any
	if json.Unmarshal(doc, &v) != nil {
		v = nil
	}
	e.full = types.DefaultTypeAdapter.NativeToValue(v)
	return e.full
}

// Parent implements interpreter.Activation.
func (e *Event) Parent() interpreter.Activation { return nil }

func (r *Request) headerVal() ref.Val {
	if r.headers == nil {
		m := make(map[string]string, len(r.Header))
		for k, v := range r.Header {
			k = strings.ToLower(k)
			if prev, ok := m[k]; ok { // two spellings of one name (not from net/http)
				v = append([]string{prev}, v...)
			}
			m[k] = strings.Join(v, ", ")
		}
		r.headers = types.DefaultTypeAdapter.NativeToValue(m)
	}
	return r.headers
}

// ErrCostLimit is wrapped by the error of an evaluation stopped at CostLimit.
var ErrCostLimit = errors.New("filter exceeded its cost limit")

// Match evaluates the filter on e. An error (a missing key, a wrong type, the
// cost limit) leaves the decision to the caller.
func (f *Filter) Match(e *Event) (bool, error) {
	ok, _, err := f.eval(e)
	return ok, err
}

// eval also returns the cost spent, for the tests.
func (f *Filter) eval(e *Event) (bool, uint64, error) {
	e.cur, e.refused = f.plan, nil
	out, det, err := f.prg.Eval(e)
	e.cur = nil
	var cost uint64
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	if err != nil && e.refused != nil {
		return false, cost, e.refused
	}
	if err != nil {
		var ec interpreter.EvalCancelledError
		if errors.As(err, &ec) && ec.Cause == interpreter.CostLimitExceeded {
			return false, cost, fmt.Errorf("%w (%d)", ErrCostLimit, CostLimit)
		}
		return false, cost, fmt.Errorf("evaluate filter: %w", err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, cost, fmt.Errorf("evaluate filter: the result is %s, not a bool", out.Type())
	}
	return b, cost, nil
}

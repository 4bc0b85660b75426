package filter

import (
	"errors"
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/hookwarden/hookwarden/internal/extract"
)

// Bounds on what one evaluation decodes of a body: the whole body, or each
// member a plan selects. Decoding is done before CEL counts a single
// operation (size(body) decodes the body whole), so CostLimit alone does
// not bound it: a 1 MiB body of small values took 50-100 ms to decode.
// Past a bound the value is not decoded and the evaluation fails with
// ErrDecodeLimit, like any evaluation error: the job is created. The
// figures are in docs/reference.md, "Content filters"
// (BenchmarkFilterDecodeLimit).
const (
	MaxDecodeBytes  = 64 << 10 // bytes of JSON text in one decoded value
	MaxDecodeValues = 4096     // values in it (each scalar, array and object)
	MaxDecodeDepth  = 32       // nesting of arrays and objects in it
)

// ErrDecodeLimit is wrapped by the error of an evaluation that would have
// decoded a part of the body past a bound.
var ErrDecodeLimit = errors.New("filter: the body part it reads is past the decode bounds")

// checkDecode reports whether raw, a valid JSON value, is within the
// bounds, in one scan that skips strings (IndexByte finds their quotes)
// and allocates nothing.
func checkDecode(raw []byte) error {
	if len(raw) > MaxDecodeBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrDecodeLimit, len(raw), MaxDecodeBytes)
	}
	values, depth := 1, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			end := extract.StringEnd(raw, i)
			if end < 0 {
				return nil // not valid JSON: the decode decides
			}
			i = end - 1
		case '{', '[':
			if depth++; depth > MaxDecodeDepth {
				return fmt.Errorf("%w: nested over %d deep", ErrDecodeLimit, MaxDecodeDepth)
			}
			// A non-empty container holds one value more than its commas.
			j := i + 1
			for j < len(raw) && (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\n' || raw[j] == '\r') {
				j++
			}
			if j < len(raw) && raw[j] != '}' && raw[j] != ']' {
				values++
			}
		case '}', ']':
			depth--
		case ',':
			values++
		default:
			continue
		}
		if values > MaxDecodeValues {
			return fmt.Errorf("%w: over %d values", ErrDecodeLimit, MaxDecodeValues)
		}
	}
	return nil
}

// refuse records a decode refused by the bounds and returns the value the
// variable then has: an error, which fails the evaluation that reads it.
func (e *Event) refuse(err error) ref.Val {
	e.refused = err
	return types.NewErr("%s", err.Error())
}

package metrics

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseText reads a text exposition (what /metrics serves) into one value per
// series, for the tools that watch a running hookwarden: the benchmark
// harness, the torture tests and the binary's own tests. A series is keyed as
// the exposition writes it, name{label="value",...} with the labels sorted,
// and a histogram gives its _bucket, _sum and _count series. Names are the
// classic ones, as Hookwarden's all are: a quoted (UTF-8) name, which the
// exposition would write in quotes inside the braces, is an error rather
// than a key that does not read back.
func ParseText(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	all := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		all = append(all, f)
	}
	samples, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, all...)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := make(map[string]float64, len(samples))
	for _, s := range samples {
		out[seriesKey(s.Metric)] = float64(s.Value)
	}
	return out, nil
}

// seriesKey writes a sample's series as the text exposition does.
func seriesKey(m model.Metric) string {
	names := make([]string, 0, len(m))
	for k := range m {
		if k != model.MetricNameLabel {
			names = append(names, string(k))
		}
	}
	if len(names) == 0 {
		return string(m[model.MetricNameLabel])
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(string(m[model.MetricNameLabel]))
	sep := "{"
	for _, k := range names {
		b.WriteString(sep + k + `="` + labelEscaper.Replace(string(m[model.LabelName(k)])) + `"`)
		sep = ","
	}
	b.WriteString("}")
	return b.String()
}

// labelEscaper escapes a label value as the text format does.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Package promtext reads a Prometheus text exposition (what /metrics serves)
// into a flat map, for the tools that watch a running hookwarden: the
// benchmark harness and the torture tests. It is not a full parser: it keeps
// each sample's value under its series exactly as written ("name{labels}"),
// skips comments, and ignores lines whose value does not parse.
package promtext

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Parse reads samples from r into series → value.
func Parse(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(line[:i])] = v
	}
	return out, sc.Err()
}

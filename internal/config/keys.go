package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// UnknownKeys walks a decoded configuration document (maps, lists, scalars)
// against Config's shape and reports every key that Config does not have, with
// its path: a typo such as "max_attemps" must not be silently ignored.
func UnknownKeys(doc map[string]any) []Problem {
	var ps []Problem
	walkKeys(doc, reflect.TypeOf(Config{}), "", &ps)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
	return ps
}

func walkKeys(v any, t reflect.Type, path string, ps *[]Problem) {
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return // a type error, reported by the decoder
		}
		fields := map[string]reflect.Type{}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if tag := f.Tag.Get("mapstructure"); tag != "" {
				fields[tag] = f.Type
				names = append(names, tag)
			}
		}
		for k, sub := range m {
			key := strings.ToLower(k)
			p := key
			if path != "" {
				p = path + "." + key
			}
			ft, ok := fields[key]
			if !ok {
				*ps = append(*ps, Problem{Path: p, Message: fmt.Sprintf("unknown key %q%s", k, suggest(key, names))})
				continue
			}
			walkKeys(sub, ft, p, ps)
		}
	case reflect.Pointer:
		walkKeys(v, t.Elem(), path, ps)
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range list {
			walkKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), ps)
		}
	}
}

// suggest names the closest known key when the unknown one looks like a typo.
func suggest(key string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(key, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  []int  // versions, in order
		err   string // part of the error, when one is wanted
	}{
		{"in order", fstest.MapFS{"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A"), "m/README": file("")}, []int{1, 2}, ""},
		{"gap", fstest.MapFS{"m/0001_a.sql": file(""), "m/0003_c.sql": file("")}, nil, "want version 2"},
		{"duplicate", fstest.MapFS{"m/0001_a.sql": file(""), "m/0001_b.sql": file("")}, nil, "no gaps or duplicates"},
		{"no number", fstest.MapFS{"m/init.sql": file("")}, nil, "positive version number"},
		{"zero", fstest.MapFS{"m/0000_a.sql": file("")}, nil, "positive version number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := Load(tc.files, "m")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Load = %v, %v; want an error with %q", ms, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
				t.Fatalf("versions %v, want %v", got, tc.want)
			}
			if ms[0].SQL != "A" || ms[0].Name != "0001_a.sql" {
				t.Fatalf("first = %+v", ms[0])
			}
		})
	}
}

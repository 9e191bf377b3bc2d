package hashed

import "testing"

type rec struct{ hash []byte }

func hashOf(r *rec) []byte { return r.hash }

func TestTakenAndFind(t *testing.T) {
	m := map[string]*rec{"a": {hash: []byte{1, 2}}, "b": {hash: []byte{3}}}
	for _, tc := range []struct {
		id   string
		hash []byte
		want bool
	}{
		{"a", []byte{9}, true},  // id taken
		{"c", []byte{3}, true},  // hash taken
		{"c", []byte{1}, false}, // a prefix of a hash is another hash
		{"c", []byte{1, 2, 0}, false},
		{"c", nil, false},
	} {
		if got := Taken(m, tc.id, tc.hash, hashOf); got != tc.want {
			t.Errorf("Taken(%q, %v) = %v, want %v", tc.id, tc.hash, got, tc.want)
		}
	}
	if r, ok := Find(m, []byte{3}, hashOf); !ok || r != m["b"] {
		t.Errorf("Find(3) = %v, %v; want b's record", r, ok)
	}
	if r, ok := Find(m, []byte{4}, hashOf); ok || r != nil {
		t.Errorf("Find(4) = %v, %v; want nothing", r, ok)
	}
}

package fleet

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrInvalidLabels refuses labels outside the contract of ValidateLabels;
// the error's text names the offending key.
var ErrInvalidLabels = errors.New("invalid labels")

// Bounds of a sensor's labels.
const (
	MaxLabels         = 16
	MaxLabelKeyLen    = 63
	MaxLabelValueLen  = 63
	maxLabelKeyQuoted = 80
)

func labelKeyChar(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return true
	case first:
		return false
	}
	return c == '.' || c == '_' || c == '-'
}

func labelValueChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidLabelKey: 1–63 characters of a-z 0-9 . _ -, starting with a letter
// or digit.
func ValidLabelKey(k string) bool {
	if len(k) < 1 || len(k) > MaxLabelKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !labelKeyChar(k[i], i == 0) {
			return false
		}
	}
	return true
}

// ValidLabelValue: 0–63 characters of A-Z a-z 0-9 . _ -.
func ValidLabelValue(v string) bool {
	if len(v) > MaxLabelValueLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !labelValueChar(v[i]) {
			return false
		}
	}
	return true
}

// quoteKey names a key in an error, shortened when it is long.
func quoteKey(k string) string {
	if len(k) > maxLabelKeyQuoted {
		k = k[:maxLabelKeyQuoted] + "…"
	}
	return fmt.Sprintf("%q", k)
}

// ValidateLabels checks a sensor's labels: at most MaxLabels, every key
// and value valid. The error names the first offending key (in key order).
func ValidateLabels(l map[string]string) error {
	keys := slices.Sorted(maps.Keys(l))
	for _, k := range keys {
		if !ValidLabelKey(k) {
			return fmt.Errorf("%w: key %s: keys are 1-%d characters of a-z 0-9 . _ -, starting with a letter or digit", ErrInvalidLabels, quoteKey(k), MaxLabelKeyLen)
		}
		if !ValidLabelValue(l[k]) {
			return fmt.Errorf("%w: key %s: values are 0-%d characters of A-Z a-z 0-9 . _ -", ErrInvalidLabels, quoteKey(k), MaxLabelValueLen)
		}
	}
	if len(l) > MaxLabels {
		return fmt.Errorf("%w: key %s: at most %d labels", ErrInvalidLabels, quoteKey(keys[MaxLabels]), MaxLabels)
	}
	return nil
}

// ParseLabelSelector reads one "key=value" selector of a listing or
// filter (the value may be empty).
func ParseLabelSelector(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("%w: label selector %s: want key=value", ErrInvalidLabels, quoteKey(s))
	}
	return k, v, nil
}

// labelsMatch reports whether have carries every label of want.
func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// labelsString is a canonical text of labels (sorted), for digests.
func labelsString(l map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		fmt.Fprintf(&b, "%s=%s,", k, l[k])
	}
	return b.String()
}

// Package promtext writes the Prometheus text exposition format (version
// 0.0.4) for the few families the services count themselves rather than
// through client_golang: HELP and TYPE lines, then samples with integer
// values and escaped label values. The metrics handler of each service
// parses this text and serves it with the rest of its registry.
package promtext

import (
	"io"
	"strconv"
	"strings"
)

// Type is a metric family's type.
type Type string

// The types the services write.
const (
	Counter Type = "counter"
	Gauge   Type = "gauge"
)

// ContentType is the media type of the text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Writer writes families to an io.Writer. Metric and label names are the
// caller's constants and are written as given; help texts and label values
// are escaped. The first write error is kept and later writes are skipped.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Err is the first write error, if any.
func (p *Writer) Err() error { return p.err }

// Family writes the HELP and TYPE lines of a family; its samples follow.
func (p *Writer) Family(name string, typ Type, help string) {
	b := p.buf[:0]
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, helpEscaper.Replace(help)...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	b = append(b, '\n')
	p.write(b)
}

// Sample writes one sample. labels are name, value pairs; an odd count is
// a programming error and panics.
func (p *Writer) Sample(name string, v int64, labels ...string) {
	if len(labels)%2 != 0 {
		panic("promtext: labels must be name, value pairs")
	}
	b := p.buf[:0]
	b = append(b, name...)
	for i := 0; i < len(labels); i += 2 {
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, labels[i]...)
		b = append(b, `="`...)
		b = append(b, labelEscaper.Replace(labels[i+1])...)
		b = append(b, '"')
	}
	if len(labels) > 0 {
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, v, 10)
	b = append(b, '\n')
	p.write(b)
}

// Single writes a family of one unlabelled sample.
func (p *Writer) Single(name string, typ Type, help string, v int64) {
	p.Family(name, typ, help)
	p.Sample(name, v)
}

// Count is one sample of a family whose samples differ in one label: that
// label's value and the count.
type Count struct {
	Value string
	N     uint64
}

// Counts writes a family of one sample per count, each labelled
// label="<its Value>" (outcomes, states).
func (p *Writer) Counts(name string, typ Type, help, label string, counts ...Count) {
	p.Family(name, typ, help)
	for _, c := range counts {
		p.Sample(name, int64(c.N), label, c.Value)
	}
}

// Bool is 1 for true and 0 for false, the value of a switch's gauge.
func Bool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (p *Writer) write(b []byte) {
	p.buf = b
	if p.err != nil {
		return
	}
	_, p.err = p.w.Write(b)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
)

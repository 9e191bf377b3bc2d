// Package misp looks indicators up in a MISP instance with
// POST {url}/attributes/restSearch (Authorization: <key>, JSON in and
// out). It implements analytics.ThreatIntel: a value MISP does not know is
// no hit and no error. The key travels only in the Authorization header.
package misp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rxc-project/rxc/adapters/outbound"
	"github.com/rxc-project/rxc/core/analytics"
)

// Defaults of Config.
const (
	DefaultTimeout = 3 * time.Second
	DefaultLimit   = 20
	// maxResponse bounds what one search may return.
	maxResponse = 4 << 20
)

// Config wires a Client.
type Config struct {
	URL string
	Key string
	// Timeout bounds one lookup.
	Timeout time.Duration
	// Limit is the most attributes asked for per value.
	Limit int
	// InsecureSkipVerify accepts any server certificate (self-signed
	// instances on a lab network).
	InsecureSkipVerify bool
	// TLSConfig, when set, is the base TLS configuration (a private CA).
	TLSConfig *tls.Config
}

// Client is a MISP client.
type Client struct {
	url     string
	key     string
	timeout time.Duration
	limit   int
	http    *http.Client
}

var _ analytics.ThreatIntel = (*Client)(nil)

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := outbound.BaseURL("misp: URL", cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Key == "" {
		return nil, errors.New("misp: key is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Limit <= 0 {
		cfg.Limit = DefaultLimit
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSConfig != nil {
		tlsCfg = cfg.TLSConfig.Clone()
	}
	tlsCfg.InsecureSkipVerify = cfg.InsecureSkipVerify //nolint:gosec // operator's explicit choice, documented
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	return &Client{
		url: base, key: cfg.Key, timeout: cfg.Timeout, limit: cfg.Limit,
		http: &http.Client{Transport: tr, Timeout: cfg.Timeout},
	}, nil
}

type searchRequest struct {
	Value        string `json:"value"`
	ReturnFormat string `json:"returnFormat"`
	Limit        int    `json:"limit"`
}

type searchResponse struct {
	Response struct {
		Attribute []struct {
			Value    string `json:"value"`
			Type     string `json:"type"`
			Category string `json:"category"`
			Event    struct {
				Info string `json:"info"`
			} `json:"Event"`
		} `json:"Attribute"`
	} `json:"response"`
}

// Lookup searches attributes whose value is indicator.
func (c *Client) Lookup(ctx context.Context, indicator string) ([]analytics.IntelHit, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body, err := json.Marshal(searchRequest{Value: indicator, ReturnFormat: "json", Limit: c.limit})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/attributes/restSearch", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("misp: %w", err)
	}
	req.Header.Set("Authorization", c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("misp: search: %w", outbound.Cause(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return nil, fmt.Errorf("misp: search answered %d", res.StatusCode)
	}
	var out searchResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, maxResponse)).Decode(&out); err != nil {
		return nil, fmt.Errorf("misp: malformed search answer: %w", err)
	}
	hits := make([]analytics.IntelHit, 0, len(out.Response.Attribute))
	for _, a := range out.Response.Attribute {
		hits = append(hits, analytics.IntelHit{Value: a.Value, Type: a.Type, Category: a.Category, Event: a.Event.Info})
	}
	return hits, nil
}

package app

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/openai/openaitest"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// TestChatStatusFollowsConfiguration: the status flags follow the
// ANALYTICS_CHAT_ settings, the provider's reachability and whether events
// are stored.
func TestChatStatusFollowsConfiguration(t *testing.T) {
	t.Parallel()
	const key, model = "sk-status-key-77aa", "llama3.1:8b"
	provider := openaitest.New(t, key, model)
	closed := httptest.NewServer(nil)
	closed.Close()

	migrated := pool(t)
	if _, err := applyMigrations(context.Background(), migrated); err != nil {
		t.Fatal(err)
	}
	empty := pool(t) // no events table

	books := t.TempDir()
	if err := os.WriteFile(filepath.Join(books, "scan.md"), []byte("# Scanner triage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noBooks := t.TempDir()
	if err := os.WriteFile(filepath.Join(noBooks, "notes.txt"), []byte("not a playbook"), 0o600); err != nil {
		t.Fatal(err)
	}

	on := ChatConfig{Enabled: true, BaseURL: provider.URL, Model: model, APIKey: key, Timeout: 5 * time.Second,
		Enrichment: EnrichmentConfig{Timeout: time.Second}}
	with := func(change func(*ChatConfig)) ChatConfig {
		c := on
		change(&c)
		return c
	}
	tests := []struct {
		name      string
		cfg       ChatConfig
		pool      *pgxpool.Pool
		ingestion bool
		want      analytics.Status
	}{
		{"switched off", with(func(c *ChatConfig) { c.Enabled = false }), migrated, true, analytics.Status{Model: model}},
		{"no base URL", with(func(c *ChatConfig) { c.BaseURL = "" }), migrated, true, analytics.Status{Model: model}},
		{"no model", with(func(c *ChatConfig) { c.Model = "" }), migrated, true, analytics.Status{}},
		{"provider unreachable", with(func(c *ChatConfig) { c.BaseURL = closed.URL + "/v1" }), migrated, true, analytics.Status{Model: model}},
		{"provider refuses the key", with(func(c *ChatConfig) { c.APIKey = "sk-wrong" }), migrated, true, analytics.Status{Model: model}},
		{"reachable", on, migrated, false, analytics.Status{Enabled: true, Model: model}},
		{"threat intel complete", with(func(c *ChatConfig) {
			c.Enrichment = EnrichmentConfig{Enabled: true, MISPURL: "https://misp.example", MISPKey: "k", Timeout: time.Second}
		}), migrated, false, analytics.Status{Enabled: true, Model: model, ThreatIntel: true}},
		{"threat intel without key", with(func(c *ChatConfig) {
			c.Enrichment = EnrichmentConfig{Enabled: true, MISPURL: "https://misp.example", Timeout: time.Second}
		}), migrated, false, analytics.Status{Enabled: true, Model: model}},
		{"threat intel switched off", with(func(c *ChatConfig) {
			c.Enrichment = EnrichmentConfig{MISPURL: "https://misp.example", MISPKey: "k", Timeout: time.Second}
		}), migrated, false, analytics.Status{Enabled: true, Model: model}},
		{"playbooks", with(func(c *ChatConfig) { c.PlaybooksDir = books }), migrated, false, analytics.Status{Enabled: true, Model: model, Playbooks: true}},
		{"playbook folder without Markdown", with(func(c *ChatConfig) { c.PlaybooksDir = noBooks }), migrated, false, analytics.Status{Enabled: true, Model: model}},
		{"playbook folder missing", with(func(c *ChatConfig) { c.PlaybooksDir = filepath.Join(books, "nope") }), migrated, false, analytics.Status{Enabled: true, Model: model}},
		{"events stored", on, migrated, true, analytics.Status{Enabled: true, Model: model, HistoricalEnrichment: true}},
		{"ingestion on, no events table", on, empty, true, analytics.Status{Enabled: true, Model: model}},
		{"everything", with(func(c *ChatConfig) {
			c.PlaybooksDir = books
			c.Enrichment = EnrichmentConfig{Enabled: true, MISPURL: "https://misp.example", MISPKey: "k", Timeout: time.Second}
		}), migrated, true, analytics.Status{Enabled: true, Model: model, ThreatIntel: true, HistoricalEnrichment: true, Playbooks: true}},
		{"disabled chat offers nothing", with(func(c *ChatConfig) {
			c.Enabled = false
			c.PlaybooksDir = books
			c.Enrichment = EnrichmentConfig{Enabled: true, MISPURL: "https://misp.example", MISPKey: "k", Timeout: time.Second}
		}), migrated, true, analytics.Status{Model: model}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			svc, err := newAnalytics(tc.cfg, tc.pool, tc.ingestion, slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if got := svc.ChatStatus(context.Background()); got != tc.want {
				t.Errorf("status %+v; want %+v", got, tc.want)
			}
			if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), "sk-wrong") {
				t.Errorf("a log line holds the API key: %s", logs.String())
			}
		})
	}
}

func TestNewAnalyticsRefusesBadURLs(t *testing.T) {
	t.Parallel()
	p := pool(t)
	log := slog.New(slog.DiscardHandler)
	if _, err := newAnalytics(ChatConfig{Enabled: true, BaseURL: "ftp://model", Model: "m"}, p, false, log); err == nil {
		t.Error("a non-http model URL was accepted")
	}
	bad := ChatConfig{Enrichment: EnrichmentConfig{Enabled: true, MISPURL: "misp.example", MISPKey: "k"}}
	if _, err := newAnalytics(bad, p, false, log); err == nil {
		t.Error("a MISP URL without scheme was accepted")
	}
}

func pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

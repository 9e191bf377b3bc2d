package app

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/misp"
	"github.com/rxc-project/rxc/adapters/openai"
	"github.com/rxc-project/rxc/adapters/playbooks"
	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// newAnalytics wires the analytics service from the ANALYTICS_CHAT_ group.
// Each optional part is built only when its settings are complete; an
// incomplete group is logged and left off rather than stopping the control
// plane. ingestion says events are being written to the events table.
func newAnalytics(cfg ChatConfig, pool *pgxpool.Pool, ingestion bool, log *slog.Logger) (*analytics.Service, error) {
	store, err := analyticsstore.New(analyticsstore.Config{Pool: pool})
	if err != nil {
		return nil, err
	}
	ac := analytics.Config{
		Events: store, ChatEnabled: cfg.Enabled, Model: cfg.Model, IngestionEnabled: ingestion,
		IncludePrivate: cfg.Enrichment.IncludePrivate, ModelTimeout: cfg.Timeout,
		EnrichmentTimeout: cfg.Enrichment.Timeout, Logger: log,
	}
	if cfg.Enabled {
		if cfg.BaseURL == "" || cfg.Model == "" {
			log.Warn("analytics chat enabled without ANALYTICS_CHAT_BASE_URL and ANALYTICS_CHAT_MODEL; it stays off")
		} else if ac.Provider, err = openai.New(openai.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Timeout: cfg.Timeout}); err != nil {
			return nil, fmt.Errorf("configuration: ANALYTICS_CHAT_BASE_URL: %w", err)
		}
	}
	e := cfg.Enrichment
	switch {
	case !e.Enabled:
	case e.MISPURL == "" || e.MISPKey == "":
		log.Warn("threat-intel enrichment enabled without ANALYTICS_CHAT_ENRICHMENT_MISP_URL and _MISP_KEY; it stays off")
	default:
		if e.InsecureSkipVerify {
			log.Warn("MISP certificate verification is off (ANALYTICS_CHAT_ENRICHMENT_INSECURE_SKIP_VERIFY)")
		}
		if ac.Intel, err = misp.New(misp.Config{URL: e.MISPURL, Key: e.MISPKey, Timeout: e.Timeout, InsecureSkipVerify: e.InsecureSkipVerify}); err != nil {
			return nil, fmt.Errorf("configuration: ANALYTICS_CHAT_ENRICHMENT_MISP_URL: %w", err)
		}
	}
	if cfg.PlaybooksDir != "" {
		lib, err := playbooks.New(playbooks.Config{Dir: cfg.PlaybooksDir})
		if err != nil {
			log.Warn("playbooks folder unusable; playbooks stay off", logkey.Error, err)
		} else {
			ac.Playbooks = lib
		}
	}
	return analytics.New(ac)
}

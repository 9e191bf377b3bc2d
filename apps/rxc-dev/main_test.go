package main

import (
	"os"
	"testing"
	"time"
)

func TestChatConfigReadsTheControlPlaneVariables(t *testing.T) {
	for _, k := range []string{"ANALYTICS_CHAT_ENABLED", "ANALYTICS_CHAT_BASE_URL", "ANALYTICS_CHAT_MODEL", "ANALYTICS_CHAT_API_KEY",
		"ANALYTICS_CHAT_ENRICHMENT_ENABLED", "ANALYTICS_CHAT_ENRICHMENT_MISP_URL", "ANALYTICS_CHAT_ENRICHMENT_MISP_KEY"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	off, err := chatConfig()
	if err != nil {
		t.Fatal(err)
	}
	if off.Enabled || off.Enrichment.Enabled || off.RatePerMinute != 10 || off.Enrichment.Timeout != 3*time.Second {
		t.Fatalf("without variables: %+v, want the chat off with the control plane's defaults", off)
	}

	t.Setenv("ANALYTICS_CHAT_ENABLED", "true")
	t.Setenv("ANALYTICS_CHAT_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("ANALYTICS_CHAT_MODEL", "m-1")
	t.Setenv("ANALYTICS_CHAT_ENRICHMENT_ENABLED", "true")
	t.Setenv("ANALYTICS_CHAT_ENRICHMENT_MISP_URL", "http://127.0.0.1:2")
	on, err := chatConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !on.Enabled || on.BaseURL != "http://127.0.0.1:1/v1" || on.Model != "m-1" || !on.Enrichment.Enabled || on.Enrichment.MISPURL != "http://127.0.0.1:2" {
		t.Fatalf("with variables: %+v", on)
	}

	t.Setenv("ANALYTICS_CHAT_TIMEOUT", "soon")
	if _, err := chatConfig(); err == nil {
		t.Fatal("a malformed ANALYTICS_CHAT_TIMEOUT was accepted")
	}
}

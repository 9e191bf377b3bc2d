package main

import (
	"bytes"
	"os"
	"strings"
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

// -h prints the flags and the environment on standard output and exits 0
// without starting anything; -clean on a folder that is no state folder
// refuses; bad flags exit 2.
func TestHelpAndUsage(t *testing.T) {
	state := t.TempDir() + "/never-created"
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"-state", state, "-h"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		for _, want := range []string{"usage: rxc-dev", "-web-addr", "-start-sensors", "-clean", "ANALYTICS_CHAT_ENABLED", "PG_BIN"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("%v: help lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatal("-h created the state folder")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-nope"}, &out, &errb); code != 2 {
		t.Fatalf("unknown flag: exit %d", code)
	}
	notState := t.TempDir()
	if err := os.WriteFile(notState+"/keep", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"-clean", "-state", notState}, &out, &errb); code != 1 {
		t.Fatalf("-clean of a folder that is no state folder: exit %d", code)
	}
	if _, err := os.Stat(notState + "/keep"); err != nil {
		t.Fatal("-clean removed a folder that was no state folder")
	}
}

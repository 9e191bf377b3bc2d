package appmain

import (
	"strings"
	"testing"
)

func TestWantsHelp(t *testing.T) {
	for args, want := range map[string]bool{
		"-h": true, "--help": true, "-help": true, "help": true, "--dns x -h": true,
		"": false, "--dns x": false, "-- -h": false, "--hostname": false,
	} {
		if got := WantsHelp(strings.Fields(args)); got != want {
			t.Errorf("WantsHelp(%q) = %v, want %v", args, got, want)
		}
	}
}

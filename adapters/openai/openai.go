// Package openai is a client of OpenAI-compatible chat model servers
// (OpenAI, Ollama, vLLM, llama.cpp …): it checks the server with
// GET {base}/models and streams answers from POST {base}/chat/completions
// with "stream": true, reading the server-sent events until "data: [DONE]".
// It implements analytics.ModelProvider. The API key travels only in the
// Authorization header; no error or log line carries it.
package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/outbound"
	"github.com/rxc-project/rxc/core/analytics"
)

// maxLine bounds one SSE line of the answer.
const maxLine = 1 << 20

// Config wires a Client.
type Config struct {
	// BaseURL is the API root including its version, e.g.
	// http://127.0.0.1:11434/v1.
	BaseURL string
	APIKey  string
	// Timeout bounds each call as a whole (a streamed answer included)
	// when the caller's context has no earlier deadline.
	Timeout time.Duration
	// HTTPClient defaults to a client with the transport's defaults.
	HTTPClient *http.Client
}

// Client talks to one OpenAI-compatible server.
type Client struct {
	base    string
	key     string
	timeout time.Duration
	http    *http.Client
}

var _ analytics.ModelProvider = (*Client)(nil)

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := outbound.BaseURL("openai: base URL", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	return &Client{base: base, key: cfg.APIKey, timeout: cfg.Timeout, http: cfg.HTTPClient}, nil
}

// Error is a refusal by the model server.
type Error struct {
	Status int
	// Message is the server's own error message, if it gave one.
	Message string
}

func (e *Error) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("model server answered %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("model server answered %d", e.Status)
}

// Ping lists the server's models: it proves the server answers and
// accepts the key.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := c.do(ctx, http.MethodGet, "/models", nil, "application/json")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	return nil
}

type chatRequest struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Stream   bool      `json:"stream"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Stream asks for a streamed completion and calls onDelta with each
// content piece. The answer must end with "data: [DONE]"; a stream cut
// short is an error.
func (c *Client) Stream(ctx context.Context, model string, msgs []analytics.Message, onDelta func(string) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := chatRequest{Model: model, Stream: true}
	for _, m := range msgs {
		req.Messages = append(req.Messages, message{Role: m.Role, Content: m.Content})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	res, err := c.do(ctx, http.MethodPost, "/chat/completions", body, "text/event-stream")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // comments, event names, ids and blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return nil
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return fmt.Errorf("openai: malformed stream chunk: %w", err)
		}
		if ch.Error != nil {
			return &Error{Status: http.StatusOK, Message: c.redact(ch.Error.Message)}
		}
		for _, choice := range ch.Choices {
			if choice.Delta.Content == "" {
				continue
			}
			if err := onDelta(choice.Delta.Content); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("openai: reading the stream: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("openai: the stream ended without [DONE]")
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("openai: %s %s: %w", method, path, outbound.Cause(err))
	}
	if res.StatusCode/100 != 2 {
		defer res.Body.Close()
		return nil, c.refusal(res)
	}
	return res, nil
}

// refusal reads an OpenAI-style {"error": {"message": …}} body, bounded.
func (c *Client) refusal(res *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 8<<10))
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	msg := ""
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil {
			msg = obj.Message
		} else {
			_ = json.Unmarshal(e.Error, &msg)
		}
	}
	return &Error{Status: res.StatusCode, Message: c.redact(msg)}
}

// redact bounds a server's message and removes the key from it: some
// servers quote the key they refused.
func (c *Client) redact(msg string) string {
	if c.key != "" {
		msg = strings.ReplaceAll(msg, c.key, "[redacted]")
	}
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return msg
}

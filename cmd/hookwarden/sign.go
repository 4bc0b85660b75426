package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/signature"
)

func newSignCmd(g *globals) *cobra.Command {
	var source, bodyFile, sendURL string
	var demo bool
	cmd := &cobra.Command{
		Use:   "sign --source NAME [--body FILE] [--send URL]",
		Short: "Print (or send) a correctly signed test request for a source",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg *config.Config
			var err error
			if demo {
				cfg, _, err = demoConfigLoaded(g, false)
				source = "demo"
			} else {
				cfg, err = g.config()
			}
			if err != nil {
				return err
			}
			var src *config.Source
			for i := range cfg.Sources {
				if cfg.Sources[i].Name == source {
					src = &cfg.Sources[i]
				}
			}
			if src == nil {
				return usageErrorf("sign: no source %q in the configuration (use --source NAME)", source)
			}
			id := newTestID()
			body := []byte(fmt.Sprintf(`{"id":"evt_%s","type":"hookwarden.test","created":%d,"data":{"message":"hello from hookwarden sign"}}`,
				id, time.Now().Unix()))
			if bodyFile != "" {
				if bodyFile == "-" {
					body, err = io.ReadAll(g.stdin)
				} else {
					body, err = os.ReadFile(bodyFile)
				}
				if err != nil {
					return usageErrorf("sign: read body: %v", err)
				}
			}
			params, err := src.SignatureParams()
			if err != nil {
				return usageErrorf("sign: %v", err)
			}
			hdr, body, err := signature.SignBody(params, body, time.Now(), "msg_"+id)
			if err != nil {
				return fmt.Errorf("sign: %w", err)
			}
			if hdr.Get("Content-Type") == "" {
				hdr.Set("Content-Type", "application/json")
			}
			if sendURL == "" {
				// Exact: a shell command whose body is the user's own file.
				printCurl(rawWriter(g.stdout), "http://"+cfg.Listen+"/hooks/"+src.Name, hdr, body)
				return nil
			}
			return send(g, sendURL, hdr, body)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "configured source to sign for")
	cmd.Flags().StringVar(&bodyFile, "body", "", "file with the body to sign (- for stdin); default a small test event")
	cmd.Flags().StringVar(&sendURL, "send", "", "send the request to this URL instead of printing it")
	cmd.Flags().BoolVar(&demo, "demo", false, "sign for the built-in demo's source")
	return cmd
}

func newTestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func printCurl(w io.Writer, url string, hdr http.Header, body []byte) {
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "curl -sS -X POST %s \\\n", shellQuote(url))
	for _, k := range keys {
		for _, v := range hdr[k] {
			fmt.Fprintf(w, "  -H %s \\\n", shellQuote(k+": "+v))
		}
	}
	fmt.Fprintf(w, "  --data-binary %s\n", shellQuote(string(body)))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func send(g *globals, url string, hdr http.Header, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return usageErrorf("sign: %v", err)
	}
	req.Header = hdr
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("sign: send: %w", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(g.stdout, "%s %s\n", resp.Status, bytes.TrimSpace(out))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sign: %s answered %s", url, resp.Status)
	}
	return nil
}

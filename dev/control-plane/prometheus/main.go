// Command promcheck reads what the operator serves and ships with Prometheus' own code, so tests
// prove that a Prometheus server would accept it rather than our reading of the formats:
//
//	promcheck scrape <content-type> <file>   parse a /metrics body with the scrape loop's parser
//	                                         (model/textparse, chosen by Content-Type as a scrape
//	                                         does) and print one line per sample: name{labels} value
//	promcheck rules <file>...                check rule files as `promtool check rules` does
//	                                         (model/rulefmt, which parses every PromQL expression)
//	promcheck fetch <file>                   scrape one target as a Prometheus server would: the
//	                                         file holds a scrape job's scheme, metrics_path, params
//	                                         and HTTP client settings (tls_config, authorization,
//	                                         ... as Prometheus' configuration spells them) and the
//	                                         target's address; the answer is parsed and printed as
//	                                         by scrape
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v2"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: promcheck scrape <content-type> <file> | promcheck rules <file>... | promcheck fetch <file>")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "scrape":
		if len(os.Args) != 4 {
			err = errors.New("scrape takes a content type and a file")
			break
		}
		err = scrape(os.Args[2], os.Args[3])
	case "rules":
		err = rules(os.Args[2:])
	case "fetch":
		err = fetch(os.Args[2])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func scrape(contentType, file string) error {
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	return parse(contentType, body)
}

// fetchJob is the part of a Prometheus scrape job that decides the request to one target.
type fetchJob struct {
	Scheme           string                  `yaml:"scheme"`
	MetricsPath      string                  `yaml:"metrics_path"`
	Params           url.Values              `yaml:"params,omitempty"`
	Target           string                  `yaml:"target"`
	HTTPClientConfig config.HTTPClientConfig `yaml:",inline"`
}

// The Accept header a Prometheus scrape sends by default (OpenMetrics preferred, then the text
// format).
const acceptHeader = "application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"

func fetch(file string) error {
	text, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	job := fetchJob{HTTPClientConfig: config.DefaultHTTPClientConfig}
	if err := yaml.UnmarshalStrict(text, &job); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if job.Target == "" || job.Scheme == "" {
		return fmt.Errorf("%s: scheme and target are required", file)
	}
	if err := job.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	client, err := config.NewClientFromConfig(job.HTTPClientConfig, "promcheck")
	if err != nil {
		return err
	}
	target := url.URL{Scheme: job.Scheme, Host: job.Target, Path: job.MetricsPath, RawQuery: job.Params.Encode()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", target.String(), resp.Status, body)
	}
	return parse(resp.Header.Get("Content-Type"), body)
}

// parse reads body as a scrape does and prints one line per sample, then the types.
func parse(contentType string, body []byte) error {
	// A warning from New (an unknown or fallback media type) fails too: the operator must name
	// its format exactly.
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil {
		return fmt.Errorf("content type %q: %w", contentType, err)
	}
	if p == nil {
		return fmt.Errorf("content type %q: Prometheus has no parser for it", contentType)
	}
	types := map[string]string{}
	var lines []string
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch entry {
		case textparse.EntryType:
			name, typ := p.Type()
			types[string(name)] = string(typ)
		case textparse.EntrySeries:
			_, _, value := p.Series()
			var lset labels.Labels
			p.Labels(&lset)
			lines = append(lines, fmt.Sprintf("%s %g", lset.String(), value))
		}
	}
	sort.Strings(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
	names := make([]string, 0, len(types))
	for name := range types {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("# TYPE %s %s\n", name, types[name])
	}
	return nil
}

func rules(files []string) error {
	failed := false
	for _, file := range files {
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger())
		for _, e := range errs {
			failed = true
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, e)
		}
		if groups != nil {
			count := 0
			for _, g := range groups.Groups {
				count += len(g.Rules)
			}
			fmt.Printf("%s: %d rules found\n", file, count)
		}
	}
	if failed {
		return errors.New("rule files have errors")
	}
	return nil
}

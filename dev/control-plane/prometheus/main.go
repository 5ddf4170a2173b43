// Command promcheck reads what the operator serves and ships with Prometheus' own code, so tests
// prove that a Prometheus server would accept it rather than our reading of the formats:
//
//	promcheck scrape <content-type> <file>   parse a /metrics body with the scrape loop's parser
//	                                         (model/textparse, chosen by Content-Type as a scrape
//	                                         does) and print one line per sample: name{labels} value
//	promcheck rules <file>...                check rule files as `promtool check rules` does
//	                                         (model/rulefmt, which parses every PromQL expression)
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: promcheck scrape <content-type> <file> | promcheck rules <file>...")
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

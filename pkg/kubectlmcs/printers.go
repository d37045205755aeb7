package kubectlmcs

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
)

// AnnotationContext is added by get to every object it prints with
// kubectl's printers: the member (kubeconfig context) it was read from,
// as kubectl's -A keeps each object's namespace in its metadata. It is
// never written to a cluster.
const AnnotationContext = "multiclusterservices.k8s.io/context"

// printFlags are kubectl get's printers beside its table, with kubectl's
// flags: -o json|yaml (--show-managed-fields), name, jsonpath and
// go-template (--template), custom-columns (--no-headers).
type printFlags struct {
	jsonYAML *genericclioptions.JSONYamlPrintFlags
	name     *genericclioptions.NamePrintFlags
	template *genericclioptions.KubeTemplatePrintFlags
	columns  *get.CustomColumnsPrintFlags
}

func newPrintFlags() *printFlags {
	return &printFlags{
		jsonYAML: genericclioptions.NewJSONYamlPrintFlags(),
		name:     genericclioptions.NewNamePrintFlags(""),
		template: genericclioptions.NewKubeTemplatePrintFlags(),
		columns:  get.NewCustomColumnsPrintFlags(),
	}
}

func (f *printFlags) addFlags(cmd *cobra.Command) {
	f.jsonYAML.AddFlags(cmd)
	f.name.AddFlags(cmd)
	f.template.AddFlags(cmd)
	f.columns.AddFlags(cmd)
}

// formats are the -o values the printers take (wide and the default
// table are get's own).
func (f *printFlags) formats() []string {
	return slices.Concat(f.jsonYAML.AllowedFormats(), f.name.AllowedFormats(), f.template.AllowedFormats(), f.columns.AllowedFormats())
}

// outputFormat is -o as kubectl reads it: a --template without -o is a
// go-template.
func outputFormat(output string, template *genericclioptions.KubeTemplatePrintFlags) string {
	if output == "" && template.TemplateArgument != nil && *template.TemplateArgument != "" {
		return "go-template"
	}
	return output
}

// printer returns kubectl's printer of format, as kubectl get picks it.
func (f *printFlags) printer(format string, noHeaders bool) (printers.ResourcePrinter, error) {
	format = outputFormat(format, f.template)
	f.columns.NoHeaders = noHeaders
	if f.template.TemplateArgument != nil {
		f.columns.TemplateArgument = *f.template.TemplateArgument
	}
	if p, err := f.template.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	if p, err := f.jsonYAML.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	if p, err := f.columns.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	if p, err := f.name.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	return nil, genericclioptions.NoCompatiblePrinterError{OutputFormat: &format, AllowedFormats: append(f.formats(), "wide")}
}

// servedList is a List of the objects as their members serve them, each
// annotated with its member's context, in the order given.
func servedList(contexts []string, objects []map[string]any) *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}}}
	for i, o := range objects {
		u := unstructured.Unstructured{Object: o}
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationContext] = contexts[i]
		u.SetAnnotations(annotations)
		list.Items = append(list.Items, u)
	}
	return list
}

// printServed prints the objects with p.
func printServed(w io.Writer, p printers.ResourcePrinter, contexts []string, objects []map[string]any) error {
	return p.PrintObj(servedList(contexts, objects), w)
}

// viewPrinter prints a view of kubectl mcs's own (status), which is not a
// Kubernetes object: -o json and yaml as printObject writes
// them, and kubectl's jsonpath and go-template printers (-o
// jsonpath=..., jsonpath-file, jsonpath-as-json, go-template=...,
// go-template-file, --template, --allow-missing-template-keys) over its
// JSON form, so that scripts pick fields out as they do of kubectl's.
type viewPrinter struct {
	template *genericclioptions.KubeTemplatePrintFlags
}

func newViewPrinter() *viewPrinter {
	return &viewPrinter{template: genericclioptions.NewKubeTemplatePrintFlags()}
}

func (p *viewPrinter) addFlags(cmd *cobra.Command) { p.template.AddFlags(cmd) }

// formats are the -o values it takes, for the flag's help.
func (p *viewPrinter) formats() []string {
	return append([]string{"json", "yaml"}, p.template.AllowedFormats()...)
}

// printer returns the template printer of -o output (outputFormat), or
// nil for the command's own output (none, json, yaml).
func (p *viewPrinter) printer(output string) (printers.ResourcePrinter, error) {
	output = outputFormat(output, p.template)
	switch output {
	case "", "json", "yaml":
		return nil, nil
	}
	pr, err := p.template.ToPrinter(output)
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unknown output format %q: want one of %q", output, p.formats())
	}
	return pr, err
}

// printTemplate prints v through printer, over v's JSON form.
func printTemplate(w io.Writer, printer printers.ResourcePrinter, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	content := map[string]any{}
	if err := json.Unmarshal(data, &content); err != nil {
		return err
	}
	return printer.PrintObj(&unstructured.Unstructured{Object: content}, w)
}

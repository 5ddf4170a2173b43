// The Go operator's conversion webhook for TrustyAIService on its own, for the side-by-side
// benchmark (`trustyai-bench --go-conversion`). The Go operator's module is not served by the
// Go module proxy this project builds from, so its conversion path is rebuilt here from
// `../shared/reference/upstream-go-operator.md` (sections 1 and 2): the same v1 (hub) and
// v1alpha1 (spoke) types and JSON tags, the same ConvertTo/ConvertFrom field mapping, served the
// way its `cmd/main.go` serves it: controller-runtime v0.22.5 (the version its go.mod pins),
// `webhook.NewServer` with the Intermediate TLS profile and ALPN h2,http/1.1, the conversion
// handler registered at /convert by `NewWebhookManagedBy(...).For(v1 hub)`, which is
// `conversion.NewWebhookHandler(scheme)`.
//
// Prints "PORT <port>" once listening; stops when stdin closes.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

const group = "trustyai.opendatahub.io"

var (
	v1GV       = schema.GroupVersion{Group: group, Version: "v1"}
	v1alpha1GV = schema.GroupVersion{Group: group, Version: "v1alpha1"}
)

// viaJSON deep-copies in into out through JSON. The conversion handler never copies an object
// (it decodes, converts and encodes), so the copy's cost is not part of what is measured; the
// Go operator's generated deepcopy functions would be faster but are not in this path either.
func viaJSON[T runtime.Object](in T, out T) runtime.Object {
	raw, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		panic(fmt.Sprintf("deep copy of %T: %v", in, err))
	}
	return out
}

// Spec: byte-for-byte the same in both versions.

type StorageSpec struct {
	Format                 string `json:"format"`
	Folder                 string `json:"folder,omitempty"`
	Size                   string `json:"size,omitempty"`
	DatabaseConfigurations string `json:"databaseConfigurations,omitempty"`
}

type DataSpec struct {
	Filename string `json:"filename,omitempty"`
	Format   string `json:"format,omitempty"`
}

type MetricsSpec struct {
	Schedule  string `json:"schedule"`
	BatchSize *int   `json:"batchSize,omitempty"`
}

type TrustyAIServiceSpec struct {
	Replicas *int32      `json:"replicas"`
	Storage  StorageSpec `json:"storage"`
	Data     DataSpec    `json:"data,omitempty"`
	Metrics  MetricsSpec `json:"metrics"`
}

// v1: the hub.

type TASCondition struct {
	Type               string                 `json:"type"`
	Status             metav1.ConditionStatus `json:"status"`
	ObservedGeneration int64                  `json:"observedGeneration,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime,omitempty"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
}

type TrustyAIServiceStatus struct {
	ObservedGeneration int64                  `json:"observedGeneration,omitempty"`
	Phase              string                 `json:"phase,omitempty"`
	Replicas           int32                  `json:"replicas,omitempty"`
	Conditions         []TASCondition         `json:"conditions,omitempty"`
	Ready              corev1.ConditionStatus `json:"ready,omitempty"`
}

type TrustyAIService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TrustyAIServiceSpec   `json:"spec,omitempty"`
	Status            TrustyAIServiceStatus `json:"status,omitempty"`
}

func (*TrustyAIService) Hub() {}

func (in *TrustyAIService) DeepCopyObject() runtime.Object {
	return viaJSON(in, &TrustyAIService{})
}

type TrustyAIServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrustyAIService `json:"items"`
}

func (in *TrustyAIServiceList) DeepCopyObject() runtime.Object {
	return viaJSON(in, &TrustyAIServiceList{})
}

// v1alpha1: the spoke.

type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message"`
}

type AlphaStatus struct {
	Phase      string                 `json:"phase"`
	Replicas   int32                  `json:"replicas"`
	Conditions []Condition            `json:"conditions"`
	Ready      corev1.ConditionStatus `json:"ready,omitempty"`
}

type AlphaTrustyAIService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TrustyAIServiceSpec `json:"spec,omitempty"`
	Status            AlphaStatus         `json:"status,omitempty"`
}

func (in *AlphaTrustyAIService) DeepCopyObject() runtime.Object {
	return viaJSON(in, &AlphaTrustyAIService{})
}

type AlphaTrustyAIServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AlphaTrustyAIService `json:"items"`
}

func (in *AlphaTrustyAIServiceList) DeepCopyObject() runtime.Object {
	return viaJSON(in, &AlphaTrustyAIServiceList{})
}

func conditionStatus(s string) metav1.ConditionStatus {
	switch s {
	case string(metav1.ConditionTrue):
		return metav1.ConditionTrue
	case string(metav1.ConditionFalse):
		return metav1.ConditionFalse
	default:
		return metav1.ConditionUnknown
	}
}

// ConvertTo: v1alpha1 -> v1, inventing observedGeneration and a zero lastTransitionTime's "now"
// as the Go operator does (reference section 2.2).
func (src *AlphaTrustyAIService) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*TrustyAIService)
	dst.ObjectMeta = src.ObjectMeta
	dst.Spec = src.Spec
	dst.Status.Phase = src.Status.Phase
	dst.Status.Replicas = src.Status.Replicas
	dst.Status.Ready = src.Status.Ready
	dst.Status.ObservedGeneration = src.Generation
	dst.Status.Conditions = make([]TASCondition, len(src.Status.Conditions))
	for i, c := range src.Status.Conditions {
		ltt := c.LastTransitionTime
		if ltt.IsZero() {
			ltt = metav1.Now()
		}
		dst.Status.Conditions[i] = TASCondition{
			Type:               c.Type,
			Status:             conditionStatus(c.Status),
			ObservedGeneration: src.Generation,
			LastTransitionTime: ltt,
			Reason:             c.Reason,
			Message:            c.Message,
		}
	}
	return nil
}

// ConvertFrom: v1 -> v1alpha1, dropping observedGeneration at both levels.
func (dst *AlphaTrustyAIService) ConvertFrom(srcRaw conversion.Hub) error {
	src := srcRaw.(*TrustyAIService)
	dst.ObjectMeta = src.ObjectMeta
	dst.Spec = src.Spec
	dst.Status.Phase = src.Status.Phase
	dst.Status.Replicas = src.Status.Replicas
	dst.Status.Ready = src.Status.Ready
	dst.Status.Conditions = make([]Condition, len(src.Status.Conditions))
	for i, c := range src.Status.Conditions {
		dst.Status.Conditions[i] = Condition{
			Type:               c.Type,
			Status:             string(conditionStatus(string(c.Status))),
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		}
	}
	return nil
}

// The Intermediate profile of the Go operator's pkg/tls: TLS 1.2 and six ECDHE AEAD suites.
func intermediate(cfg *tls.Config) {
	cfg.MinVersion = tls.VersionTLS12
	cfg.CipherSuites = []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
	cfg.NextProtos = []string{"h2", "http/1.1"}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func main() {
	certDir := flag.String("cert-dir", "", "folder holding tls.crt and tls.key")
	flag.Parse()
	if *certDir == "" {
		fmt.Fprintln(os.Stderr, "--cert-dir is required")
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(v1GV.WithKind("TrustyAIService"), &TrustyAIService{})
	scheme.AddKnownTypeWithName(v1GV.WithKind("TrustyAIServiceList"), &TrustyAIServiceList{})
	scheme.AddKnownTypeWithName(v1alpha1GV.WithKind("TrustyAIService"), &AlphaTrustyAIService{})
	scheme.AddKnownTypeWithName(v1alpha1GV.WithKind("TrustyAIServiceList"), &AlphaTrustyAIServiceList{})
	metav1.AddToGroupVersion(scheme, v1GV)
	metav1.AddToGroupVersion(scheme, v1alpha1GV)

	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "no free port:", err)
		os.Exit(1)
	}
	server := webhook.NewServer(webhook.Options{
		Host:    "127.0.0.1",
		Port:    port,
		CertDir: *certDir,
		TLSOpts: []func(*tls.Config){intermediate},
	})
	server.Register("/convert", ctrlconversion.NewWebhookHandler(scheme))

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	done := make(chan error, 1)
	go func() { done <- server.Start(ctx) }()
	// The port is printed once a TLS handshake succeeds.
	for {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-done:
			fmt.Fprintln(os.Stderr, "webhook server:", err)
			os.Exit(1)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Printf("PORT %d\n", port)
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "webhook server:", err)
		os.Exit(1)
	}
}

package observe

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// FromEnv returns a tracer provider that exports spans over OTLP/HTTP, as
// the standard OpenTelemetry variables of the process's environment
// configure it, or nil when they configure no exporter: traces are off
// unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set, or OTEL_TRACES_EXPORTER=otlp (which exports to the default
// http://localhost:4318); OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true
// turns them off whatever else is set. The exporter reads the rest of
// OTEL_EXPORTER_OTLP_* (headers, timeout, compression, certificates), the
// SDK OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_* and the span limits, and the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name
// defaults to service, service.version to version).
//
// It refuses, rather than ignores, what it cannot do: another exporter
// (only otlp is built in) or the grpc protocol (only http/protobuf and
// http/json), and an OTEL_BSP_* value that is not a positive integer.
// Spans are batched (by a batcher of this package's, which wakes its
// goroutine per batch rather than per span) and sent in the background;
// call Shutdown on the provider to send what is left before exiting.
func FromEnv(ctx context.Context, service, version string) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch e := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); e {
	case "none":
		return nil, nil
	case "otlp":
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil // off by default: no exporter, no spans
		}
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (over HTTP) or none is supported", e)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch p := strings.TrimSpace(os.Getenv(v)); p {
		case "", "http/protobuf", "http/json":
		default:
			return nil, fmt.Errorf("%s=%q: only http/protobuf or http/json is supported", v, p)
		}
	}
	batch, err := batchFromEnv()
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil {
		exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp, batch)), sdktrace.WithResource(res)), nil
}

package awsutils

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Upstream's AWS metric names.
var (
	apiLatency = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Name:       "awscni_aws_api_latency_ms",
		Help:       "AWS API call latency in ms",
		Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
	}, []string{"api", "error", "status"})
	apiErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_aws_api_error_count",
		Help: "The number of times AWS API returns an error",
	}, []string{"api", "error"})
	ec2Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ec2api_req_count",
		Help: "The number of requests made to EC2 APIs by CNI",
	}, []string{"fn"})
	ec2Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ec2api_error_count",
		Help: "The number of failed EC2 APIs requests",
	}, []string{"fn"})
	utilsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_aws_utils_error_count",
		Help: "The number of errors in the AWS utilities that are not an AWS API's own answer, by function and error code",
	}, []string{"fn", "error"})
	// This project's: the node's EC2 request budget and EC2's throttling.
	ec2Throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ipamd_ec2_throttled_total",
		Help: "EC2 request attempts answered with a throttling error (RequestLimitExceeded), retries included, by action",
	}, []string{"fn"})
	budgetWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_ec2_budget_waits_total",
		Help: "EC2 request attempts that waited for the node's request budget (EC2_API_RATE_LIMIT, EC2_API_BURST)",
	})
	budgetWaitSeconds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_ec2_budget_wait_seconds_total",
		Help: "Seconds EC2 request attempts waited for the node's request budget",
	})
	registerOnce sync.Once
)

// RegisterMetrics registers the AWS metrics with the default registry.
func RegisterMetrics() {
	registerOnce.Do(func() {
		prometheus.MustRegister(apiLatency, apiErrors, ec2Requests, ec2Errors, utilsErrors, ec2Throttled, budgetWaits, budgetWaitSeconds)
	})
}

// Upstream's fn labels of awscni_aws_utils_error_count.
const (
	// An ENI whose attach failed could not be deleted.
	FnAllocENIDeleteErr = "AllocENIDeleteErr"
	// An ENI whose DeleteOnTermination could not be set could not be freed.
	FnENICleanupUponModifyNetworkErr = "ENICleanupUponModifyNetworkErr"
	// Freeing an ENI could not look up its attachment.
	FnGetENIAttachmentIDFailed = "getENIAttachmentIDFailed"
	// Freeing an ENI: the delete failed.
	FnFreeENIDeleteErr = "FreeENIDeleteErr"
	// The leaked-ENI sweep could not delete a leaked ENI.
	FnCleanUpLeakedENIDeleteErr = "cleanUpLeakedENIDeleteErr"
)

// CountUtilsError counts one awscni_aws_utils_error_count{fn, error}; the error
// label is the AWS error code, or "unknown" when the error carries none
// (error texts would name ENIs and grow the label set without bound).
func CountUtilsError(fn string, err error) {
	code := errorCode(err)
	if code == "" {
		code = "unknown"
	}
	utilsErrors.WithLabelValues(fn, code).Inc()
}

// ec2Call runs one EC2 action (SDK retries included) and records it.
func ec2Call[T any](ctx context.Context, action string, f func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	out, err := f(ctx)
	ec2Requests.WithLabelValues(action).Inc()
	status, failed := "200", "false"
	if err != nil {
		failed = "true"
		status = errorCode(err)
		ec2Errors.WithLabelValues(action).Inc()
		apiErrors.WithLabelValues(action, status).Inc()
		err = classify(action, err)
	}
	apiLatency.WithLabelValues(action, failed, status).Observe(float64(time.Since(start).Milliseconds()))
	return out, err
}

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/google/go-cmp v0.7.0
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
)

replace (
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/api => ./staging/src/k8s.io/api
	example.com/fork => example.com/fork v1.2.3
)

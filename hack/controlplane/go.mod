module github.com/clerum/hcc/hack/controlplane

go 1.26

module edgeprof/oracle

go 1.19

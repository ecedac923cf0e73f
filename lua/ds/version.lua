-- version.lua: the version of ds (ds.version; written into saved graph files).
return "0.1.0"

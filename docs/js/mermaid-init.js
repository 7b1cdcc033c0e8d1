// Draw the ```mermaid blocks (pymdownx.superfences renders them as <div class="mermaid">).
// mermaid.min.js beside this file: mermaid 11.17.2 from npm (`npm pack mermaid`, its
// dist/mermaid.min.js, sha256 581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8),
// MIT licence in mermaid.LICENSE. Bundled so that the diagrams draw with no network.
mermaid.initialize({ startOnLoad: true, securityLevel: "strict" });

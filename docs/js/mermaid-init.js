// Draw the ```mermaid blocks (pymdownx.superfences renders them as <pre class="mermaid">).
mermaid.initialize({ startOnLoad: true, securityLevel: "strict" });

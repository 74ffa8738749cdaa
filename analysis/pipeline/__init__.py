"""How ``analyze`` runs at scale and what it writes: the scheduled measures, tables, figures, folder."""
